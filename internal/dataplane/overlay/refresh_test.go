package overlay

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// Refresh rewrites a resolved entry whose MAC is no longer its address's
// VTEP (a pod that moved), and leaves alone the ones that are right, the
// addresses it does not know, and permanent entries.
func TestRefreshMovesEntriesToTheCurrentVTEP(t *testing.T) {
	nstest.RequireRoot(t)
	ns := nstest.New(t)
	nstest.IP(t, ns, "link", "add", "ul0", "type", "veth", "peer", "name", "ul1")
	nstest.IP(t, ns, "addr", "add", "192.168.88.1/24", "dev", "ul0")
	nstest.IP(t, ns, "link", "set", "ul0", "up")
	nstest.IP(t, ns, "link", "add", "estvx9", "type", "vxlan", "id", "9", "dstport", "8472", "local", "192.168.88.1",
		"dev", "ul0", "nolearning")
	nstest.IP(t, ns, "link", "set", "estvx9", "up")
	const oldMAC, newMAC, otherMAC = "0e:00:00:00:00:0a", "0e:00:00:00:00:0b", "0e:00:00:00:00:0c"
	nstest.IP(t, ns, "neigh", "add", "10.9.0.5", "lladdr", oldMAC, "dev", "estvx9", "nud", "reachable")
	nstest.IP(t, ns, "neigh", "add", "10.9.0.6", "lladdr", newMAC, "dev", "estvx9", "nud", "stale")
	nstest.IP(t, ns, "neigh", "add", "10.9.0.7", "lladdr", otherMAC, "dev", "estvx9", "nud", "reachable")
	nstest.IP(t, ns, "neigh", "add", "10.9.0.8", "lladdr", oldMAC, "dev", "estvx9", "nud", "permanent")

	a, err := NewAgent(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	want, _ := desired.ParseMAC(newMAC)
	table := map[netip.Addr]desired.MAC{
		netip.MustParseAddr("10.9.0.5"): want, // moved
		netip.MustParseAddr("10.9.0.6"): want, // right already
		netip.MustParseAddr("10.9.0.8"): want, // permanent: not the answerer's
	}
	lookup := func(ip netip.Addr) (desired.MAC, bool) { m, ok := table[ip]; return m, ok }
	n, err := a.Refresh("estvx9", lookup)
	if err != nil || n != 1 {
		t.Fatalf("Refresh = %d, %v; want 1 entry rewritten", n, err)
	}
	for ip, mac := range map[string]string{"10.9.0.5": newMAC, "10.9.0.6": newMAC, "10.9.0.7": otherMAC, "10.9.0.8": oldMAC} {
		if out := nstest.IP(t, ns, "neigh", "show", ip, "dev", "estvx9"); !strings.Contains(out, "lladdr "+mac) {
			t.Errorf("neighbour %s: %q; want lladdr %s", ip, out, mac)
		}
	}
	if n, err := a.Refresh("estvx9", lookup); err != nil || n != 0 {
		t.Errorf("second Refresh = %d, %v; want nothing to do", n, err)
	}
}
