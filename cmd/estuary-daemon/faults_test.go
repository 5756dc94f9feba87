//go:build faultinject

package main

import (
	"flag"
	"io"
	"testing"

	"github.com/estuary-cni/estuary/internal/daemon"
)

// A faultinject build takes --fault-datapath-file into the config.
func TestFaultFlagWithTheTag(t *testing.T) {
	fs := flag.NewFlagSet("estuary-daemon", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var cfg daemon.Config
	bindFlags(fs, &cfg)
	if err := fs.Parse([]string{"--fault-datapath-file=/run/fault"}); err != nil {
		t.Fatal(err)
	}
	if cfg.FaultDataPathFile != "/run/fault" {
		t.Errorf("FaultDataPathFile = %q, want /run/fault", cfg.FaultDataPathFile)
	}
}
