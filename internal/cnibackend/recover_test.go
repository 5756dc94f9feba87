package cnibackend

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// TestRecoverFromKernel: the pod interfaces Add built can be listed again
// from the kernel alone (the host veths' aliases and the local-pods
// routes), named by the node's records, as the daemon does when its state
// file is lost; a host veth without an alias is reported, not guessed at.
func TestRecoverFromKernel(t *testing.T) {
	e := newEnv(t)
	a, podNS := e.pod(t, "web-1", "eth0", addr("10.0.0.6/24"))
	e.add(t, a)
	ipCmd(t, e.host, "link", "add", podnet.HostVethPrefix+"bare", "type", "veth", "peer", "name", "bare-peer")
	eps, unnamed, err := recoverFrom(e.plumber, map[netip.Addr]recordedPod{
		netip.MustParseAddr("10.0.0.6"): {Namespace: "default", Pod: "web-1", PodUID: "uid-web-1"},
	}, time.Now().UTC())
	if err != nil {
		t.Fatal(err)
	}
	if len(eps) != 1 {
		t.Fatalf("recovered %d endpoints, want 1: %+v", len(eps), eps)
	}
	ep := eps[0]
	if ep.Key != (endpointstore.Key{ContainerID: a.ContainerID, IfName: "eth0"}) || ep.Netns != podNS || !ep.Recovered ||
		ep.PodNamespace != "default" || ep.PodName != "web-1" || ep.PodUID != "uid-web-1" ||
		!slices.Equal(ep.IPs, []string{"10.0.0.6/32"}) {
		t.Errorf("recovered %+v", ep)
	}
	if !slices.Equal(unnamed, []string{podnet.HostVethPrefix + "bare"}) {
		t.Errorf("host veths without an alias: %v", unnamed)
	}
	// Recovery reads only: the pod's data path is as Add left it.
	if out := ipCmd(t, e.host, "route", "show", "table", "1000"); !strings.Contains(out, "10.0.0.6 dev "+hostVeth(a)) {
		t.Errorf("table 1000 after recovery:\n%s", out)
	}
}
