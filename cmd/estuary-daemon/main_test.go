package main

import (
	"flag"
	"net"
	"net/netip"
	"testing"

	"github.com/estuary-cni/estuary/internal/daemon"
)

// The daemon's health server binds the node's loopback unless told
// otherwise: it runs in the node's network, and its /endpoints names every
// pod of the node.
func TestHealthAddressDefaultsToLoopback(t *testing.T) {
	fs := flag.NewFlagSet("estuary-daemon", flag.ContinueOnError)
	var cfg daemon.Config
	bindFlags(fs, &cfg)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if cfg.HealthAddr != daemon.DefaultHealthAddress || daemon.DefaultEndpointsAddress != daemon.DefaultHealthAddress {
		t.Errorf("--health-probe-bind-address default %q, want %q (where `estuary-daemon endpoints` reads, %q)",
			cfg.HealthAddr, daemon.DefaultHealthAddress, daemon.DefaultEndpointsAddress)
	}
	host, _, err := net.SplitHostPort(cfg.HealthAddr)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := netip.ParseAddr(host); err != nil || !a.IsLoopback() {
		t.Errorf("--health-probe-bind-address default %q binds %q, not a loopback address", cfg.HealthAddr, host)
	}
}
