package podnet

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/pkg/family"
)

func TestHostVethName(t *testing.T) {
	n := HostVethName("abc", "eth0")
	if len(n) != 14 || !strings.HasPrefix(n, HostVethPrefix) || n != HostVethName("abc", "eth0") {
		t.Errorf("HostVethName = %q", n)
	}
	if !desired.DefaultOwnership().OwnsDevice(n) {
		t.Errorf("%s is outside estuary's devices", n)
	}
	for _, other := range [][2]string{{"abd", "eth0"}, {"abc", "net1"}} {
		if HostVethName(other[0], other[1]) == n {
			t.Errorf("%v shares the name %s", other, n)
		}
	}
	if (Spec{ContainerID: "abc", IfName: "eth0", Netns: "/run/netns/x"}).HostVeth() != n {
		t.Error("a Spec's host veth is not HostVethName of its container ID and interface")
	}
}

// maxContainerIDLen is the longest container ID the CNI server accepts
// (cniserver.MaxContainerIDLen).
const maxContainerIDLen = 128

func TestEndpointAliasRoundTrip(t *testing.T) {
	// The longest key the CNI server accepts.
	sp := Spec{ContainerID: strings.Repeat("c", maxContainerIDLen), IfName: "net123456789abc", Netns: "/var/run/netns/cni-1234"}
	mac := desired.MustParseMAC("02:42:0a:00:00:07")
	for _, pinned := range []desired.MAC{{}, mac} {
		sp.MAC = pinned
		got, ok := parseEndpointAlias(endpointAlias(sp))
		if !ok || got.containerID != sp.ContainerID || got.ifName != sp.IfName || got.netns != sp.Netns || got.mac != pinned {
			t.Errorf("round trip with MAC %s: %+v %t", pinned, got, ok)
		}
	}
	sp.Netns = "/" + strings.Repeat("n", 200)
	sp.MAC = mac
	s := endpointAlias(sp)
	if len(s) > maxAlias {
		t.Errorf("alias of %d bytes exceeds the kernel's %d", len(s), maxAlias)
	}
	if got, ok := parseEndpointAlias(s); !ok || got.mac != mac || got.netns != "" {
		t.Errorf("alias without its netns: %+v %t, want the MAC kept", got, ok)
	}
	for _, bad := range []string{"", "estuary", "other c/eth0", "estuary c", "estuary /eth0", "estuary c/ x y z",
		"estuary c/eth0 /ns /other", "estuary c/eth0 /ns mac=zz", "estuary c/eth0 mac=02:00:00:00:00:01 /ns",
		"estuary c/eth0 /ns 02:00:00:00:00:01", "estuary c/eth0 /ns mac=02:00:00:00:00:01 x"} {
		if _, ok := parseEndpointAlias(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}
}

// TestDesiredLocalPods: one route per address through the pod's veth and
// the shared rule of each family present; busy veths are left out, and
// veths that do not exist are left out and reported.
func TestDesiredLocalPods(t *testing.T) {
	v4 := LocalPod{HostVeth: "est1", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.5")}}
	v6 := LocalPod{HostVeth: "est2", IPs: []netip.Addr{netip.MustParseAddr("fd00::5")}}
	busy := LocalPod{HostVeth: "est4", IPs: []netip.Addr{netip.MustParseAddr("10.0.0.7")}}
	all := func(string) bool { return true }
	want, missing := DesiredLocalPods([]LocalPod{v4, v6, busy}, map[string]bool{"est4": true}, all)
	if len(missing) != 0 {
		t.Errorf("missing = %v", missing)
	}
	wantRoutes := []desired.Route{localRoute("est1", netip.MustParseAddr("10.0.0.5")), localRoute("est2", netip.MustParseAddr("fd00::5"))}
	if !slices.Equal(want.Routes, wantRoutes) {
		t.Errorf("routes = %v, want %v", want.Routes, wantRoutes)
	}
	if !slices.Equal(want.Rules, []desired.Rule{localPodsRule(family.IPv4), localPodsRule(family.IPv6)}) {
		t.Errorf("rules = %v", want.Rules)
	}
	none := func(string) bool { return false }
	want, missing = DesiredLocalPods([]LocalPod{v4}, nil, none)
	if want.Len() != 0 || !slices.Equal(missing, []string{"est1"}) {
		t.Errorf("without veths: desired %v, missing %v", want, missing)
	}
}
