// Package clientgates sets the client-go feature gates estuary's
// long-running processes run with.
//
// One gate is changed: WatchListClient, on by default since client-go
// 1.35, makes every informer read its initial state as a stream of watch
// events rather than one list. For custom resources, which the API server
// serves only as JSON, that triples the decoding: each object is framed,
// decoded as a watch event, sniffed for its kind and decoded again, where a
// list is sniffed and decoded once. The manager's cold start at 100,000
// IPInstances spent most of its CPU there (docs/benchmarks.md, "At
// scale"), so estuary's informers list. Streamed, that cold start took
// 1.55 times as long, and the API server spent 1.6 times the CPU: it
// deep-copies and encodes each event as it does the list. The list is
// served from the API server's watch cache (resourceVersion=0) and the
// informer watches from its version, as before the gate.
//
// An explicit KUBE_FEATURE_WatchListClient in the environment wins.
package clientgates

import (
	"os"

	"github.com/go-logr/logr"
	"k8s.io/client-go/features"
)

// EnvWatchList is the environment variable that, when set, decides the
// gate instead.
const EnvWatchList = "KUBE_FEATURE_" + string(features.WatchListClient)

// listFirst reports WatchListClient off and every other gate as client-go
// does.
type listFirst struct{ features.Gates }

func (g listFirst) Enabled(f features.Feature) bool {
	if f == features.WatchListClient {
		return false
	}
	return g.Gates.Enabled(f)
}

// Apply turns WatchListClient off unless the environment sets it, and logs
// what it did. It must run before the first informer is made.
func Apply(log logr.Logger) {
	if v, ok := os.LookupEnv(EnvWatchList); ok {
		log.Info("informers' initial reads as the environment says", EnvWatchList, v)
		return
	}
	features.ReplaceFeatureGates(listFirst{features.FeatureGates()})
	log.Info("informers read their initial state with one list", "WatchListClient", false)
}
