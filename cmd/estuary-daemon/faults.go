//go:build faultinject

package main

import (
	"flag"

	"github.com/estuary-cni/estuary/internal/daemon"
)

// bindFaultFlags registers the fault-testing flags of a faultinject build
// on fs, writing into cfg.
func bindFaultFlags(fs *flag.FlagSet, cfg *daemon.Config) {
	fs.StringVar(&cfg.FaultDataPathFile, "fault-datapath-file", "",
		`fault testing only: while this file exists every data-path pass fails, and while it holds "hang" every pass hangs until it changes (empty: off)`)
}
