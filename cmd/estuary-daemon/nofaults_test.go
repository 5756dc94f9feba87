//go:build !faultinject

package main

import (
	"flag"
	"testing"

	"github.com/estuary-cni/estuary/internal/daemon"
)

// A daemon built without the faultinject tag (a release's) has no
// fault-testing flag.
func TestNoFaultFlagWithoutTheTag(t *testing.T) {
	fs := flag.NewFlagSet("estuary-daemon", flag.ContinueOnError)
	var cfg daemon.Config
	bindFlags(fs, &cfg)
	if f := fs.Lookup("fault-datapath-file"); f != nil {
		t.Errorf("--fault-datapath-file is registered in a build without the faultinject tag")
	}
}
