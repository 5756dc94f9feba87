package main

import (
	"flag"
	"io"
	"net"
	"net/netip"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/estuary-cni/estuary/internal/daemon"
	"github.com/estuary-cni/estuary/internal/kubeclient"
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

// --kube-client-qps and --kube-client-burst reach the rest.Config the
// daemon builds its clients from; unset, they are the documented defaults.
func TestKubeClientFlags(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		qps, burst float32
	}{
		{nil, kubeclient.DefaultQPS, kubeclient.DefaultBurst},
		{[]string{"--kube-client-qps=12.5", "--kube-client-burst=40"}, 12.5, 40},
	} {
		fs := flag.NewFlagSet("estuary-daemon", flag.ContinueOnError)
		var cfg daemon.Config
		bindFlags(fs, &cfg)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		cfg.Kube = &rest.Config{Host: "https://api.example:6443"}
		got := cfg.RESTConfig()
		if got.QPS != tc.qps || float32(got.Burst) != tc.burst {
			t.Errorf("%v: rest.Config QPS %g burst %d, want %g and %g", tc.args, got.QPS, got.Burst, tc.qps, tc.burst)
		}
	}
	fs := flag.NewFlagSet("estuary-daemon", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	bindFlags(fs, &daemon.Config{})
	if err := fs.Parse([]string{"--kube-client-qps=fast"}); err == nil || !strings.Contains(err.Error(), "kube-client-qps") {
		t.Errorf("--kube-client-qps=fast parsed (%v); want an error naming the flag", err)
	}
}
