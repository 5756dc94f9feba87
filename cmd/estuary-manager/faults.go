//go:build faultinject

package main

import (
	"flag"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"

	"github.com/estuary-cni/estuary/internal/faultinject"
)

// bindFaultFlags registers the fault-testing flags of a faultinject build
// on fs and returns what applies them to the manager's API client
// configuration.
func bindFaultFlags(fs *flag.FlagSet) func(logr.Logger, *rest.Config) {
	var loseEvery int64
	fs.Int64Var(&loseEvery, "fault-lose-answers", 0, "fault testing only: every nth write to IPInstances reaches the API server and its answer is then dropped, as when a connection fails after the write (0: off)")
	return func(log logr.Logger, kube *rest.Config) {
		if loseEvery > 0 {
			log.Info("fault injection: the answers to some IPInstance writes will be lost", "every", loseEvery)
			faultinject.LoseAnswers(kube, loseEvery, "ipinstances")
		}
	}
}
