package overlay

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// addForeign writes objects the overlay does not own into n's namespace.
func addForeign(t *testing.T, n *node) {
	t.Helper()
	nstest.IP(t, n.ns, "route", "add", foreignR, "via", extIP.String(), "dev", "eth0")
	nstest.IP(t, n.ns, "rule", "add", "priority", "3000", "from", "192.0.2.0/24", "lookup", "3000")
	nstest.IP(t, n.ns, "neigh", "add", "proxy", "10.244.9.9", "dev", n.hostVth)
	nstest.Exec(t, n.ns, "nft", "add", "table", "inet", "other")
	nstest.Exec(t, n.ns, "nft", "add", "chain", "inet", "other", "c", "{ type filter hook forward priority 0; }")
}

func checkForeign(t *testing.T, n *node) {
	t.Helper()
	for _, want := range []struct{ out, substr string }{
		{nstest.IP(t, n.ns, "route", "show"), foreignR + " via " + extIP.String()},
		{nstest.IP(t, n.ns, "rule", "show"), "3000:\tfrom 192.0.2.0/24 lookup 3000"},
		{nstest.IP(t, n.ns, "rule", "show"), "1000:\tfrom all lookup 1000"},
		{nstest.IP(t, n.ns, "route", "show", "table", "1000"), n.podIPs[0].String() + " dev " + n.hostVth + " proto 229 scope link"},
		{nstest.IP(t, n.ns, "neigh", "show", "proxy"), "10.244.9.9 dev " + n.hostVth},
		{nstest.Exec(t, n.ns, "nft", "list", "tables"), "table inet other"},
	} {
		if !strings.Contains(want.out, want.substr) {
			t.Errorf("%s: foreign object %q gone:\n%s", n.name, want.substr, want.out)
		}
	}
}

func apply(t *testing.T, n *node, in Input) desired.Plan {
	t.Helper()
	plan, err := n.agent.Apply(context.Background(), in)
	if err != nil {
		t.Fatalf("%s: Apply: %v", n.name, err)
	}
	return plan
}

func wantPeer(t *testing.T, what string, fromNS string, dst netip.Addr, holder string, want netip.Addr) {
	t.Helper()
	if got := nstest.Peer(t, fromNS, dst, holder, 10*time.Second); got != want {
		t.Errorf("%s: %s saw source %s, want %s", what, dst, got, want)
	}
}

func TestOverlayTwoNodes(t *testing.T) {
	l := newLab(t)
	addForeign(t, l.a)
	inA, inB := l.input(t, l.a, l.b), l.input(t, l.b, l.a)
	apply(t, l.a, inA)
	apply(t, l.b, inB)
	for _, n := range []struct {
		n  *node
		in Input
	}{{l.a, inA}, {l.b, inB}} {
		if plan := apply(t, n.n, n.in); !plan.Empty() {
			t.Errorf("%s: second Apply changed:\n%s", n.n.name, plan)
		}
		if _, nat := n.n.agent.Applied(); len(nat) != 0 {
			t.Errorf("%s: second Apply rewrote NAT of %v", n.n.name, nat)
		}
	}
	checkDevice(t, l.a, inA)
	checkForeign(t, l.a)

	a4, b4 := l.a.podIPs[0], l.b.podIPs[0]
	wantPeer(t, "pod A -> pod B", l.a.pod, b4, l.b.pod, a4)
	wantPeer(t, "pod B -> pod A", l.b.pod, a4, l.a.pod, b4)
	wantPeer(t, "node A -> pod B", l.a.ns, b4, l.b.pod, l.a.ip)
	wantPeer(t, "pod A -> external", l.a.pod, extIP, l.ext, l.a.ip)
	if l.v6 {
		a6, b6 := l.a.podIPs[1], l.b.podIPs[1]
		wantPeer(t, "pod A -> pod B (v6)", l.a.pod, b6, l.b.pod, a6)
		wantPeer(t, "node A -> pod B (v6)", l.a.ns, b6, l.b.pod, l.a.ip6)
		wantPeer(t, "pod A -> external (v6)", l.a.pod, extIP6, l.ext, l.a.ip6)
	}
	t.Run("answerer", func(t *testing.T) { testAnswerer(t, l, inA, inB) })
	t.Run("remove", func(t *testing.T) { testRemove(t, l, inA) })
}

func checkDevice(t *testing.T, n *node, in Input) {
	t.Helper()
	link := nstest.IP(t, n.ns, "-d", "link", "show", in.Device)
	for _, want := range []string{
		"vxlan id 7", "dstport 8472", "dev eth0", "local " + n.ip.String(), "nolearning",
		"mtu 1450", in.MAC.String(), "state UNKNOWN",
	} {
		if !strings.Contains(link, want) {
			t.Errorf("%s: device lacks %q:\n%s", n.name, want, link)
		}
	}
	sysctls, _ := n.agent.Applied()
	for _, s := range sysctls {
		if got := strings.TrimSpace(nstest.Exec(t, n.ns, "cat", "/proc/sys/"+s.Key)); got != s.Value {
			t.Errorf("%s: %s = %s, want %s", n.name, s.Key, got, s.Value)
		}
	}
	if len(sysctls) < 4 {
		t.Errorf("%s: sysctls = %v", n.name, sysctls)
	}
	nft := nstest.Exec(t, n.ns, "nft", "list", "table", "ip", "estuary")
	for _, want := range []string{"nat-sources", "10.244.0.0/16", "masquerade", `oifname != "estvx7"`} {
		if !strings.Contains(nft, want) {
			t.Errorf("%s: nft table lacks %q:\n%s", n.name, want, nft)
		}
	}
}

// testAnswerer drops the flood entries and proves that the answerer alone
// resolves remote pods, with REACHABLE entries carrying the VTEP MAC.
func testAnswerer(t *testing.T, l *lab, inA, inB Input) {
	inA.NoFlood, inB.NoFlood = true, true
	apply(t, l.a, inA)
	apply(t, l.b, inB)
	if fdb := nstest.Run(t, "bridge", "-n", basename(l.a.ns), "fdb", "show", "dev", inA.Device); strings.Contains(fdb, "00:00:00:00:00:00") {
		t.Fatalf("flood entries left:\n%s", fdb)
	}
	macs := map[netip.Addr]desired.MAC{}
	for _, n := range []*node{l.a, l.b} {
		nstest.IP(t, n.ns, "neigh", "flush", "dev", inA.Device)
		for _, ip := range append([]netip.Addr{n.ip, n.ip6}, n.podIPs...) {
			macs[ip] = StableMAC(n.name)
		}
	}
	lookup := func(ip netip.Addr) (desired.MAC, bool) { m, ok := macs[ip]; return m, ok }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for _, n := range []*node{l.a, l.b} {
		n.agent.OnError = func(err error) {
			select {
			case errs <- err:
			default:
			}
		}
		wg.Go(func() {
			if err := n.agent.Answer(ctx, inA.Device, lookup); err != nil {
				errs <- err
			}
		})
	}
	b4 := l.b.podIPs[0]
	wantPeer(t, "pod A -> pod B (answered)", l.a.pod, b4, l.b.pod, l.a.podIPs[0])
	neigh := nstest.IP(t, l.a.ns, "neigh", "show", b4.String(), "dev", inA.Device)
	if !strings.Contains(neigh, "lladdr "+StableMAC(l.b.name).String()) || strings.Contains(neigh, "PERMANENT") {
		t.Errorf("neighbour of %s on node A = %q, want lladdr %s, not permanent", b4, neigh, StableMAC(l.b.name))
	}
	cancel()
	if !waitTimeout(&wg, 5*time.Second) {
		t.Fatal("Answer did not return after its context ended")
	}
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("answerer: %v", err)
		}
	}
}

// testRemove applies an input without subnets: tables, rules and NAT go;
// podnet's objects and the foreign ones stay.
func testRemove(t *testing.T, l *lab, inA Input) {
	inA.Subnets, inA.Remotes, inA.LocalPods, inA.NodeIPs = nil, nil, nil, nil
	apply(t, l.a, inA)
	if out := nstest.IP(t, l.a.ns, "route", "show", "table", "1001"); strings.TrimSpace(out) != "" {
		t.Errorf("table 1001 left:\n%s", out)
	}
	if out := nstest.IP(t, l.a.ns, "rule", "show"); strings.Contains(out, "lookup 1001") || strings.Contains(out, "lookup 1002") {
		t.Errorf("overlay rules left:\n%s", out)
	}
	if out := nstest.Exec(t, l.a.ns, "nft", "list", "tables"); strings.Contains(out, "estuary") {
		t.Errorf("estuary nft tables left:\n%s", out)
	}
	checkForeign(t, l.a)
	for range 2 {
		if _, err := l.a.agent.Remove(context.Background(), inA.Device); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	}
	if out := nstest.IP(t, l.a.ns, "-o", "link", "show"); strings.Contains(out, inA.Device) {
		t.Errorf("device left:\n%s", out)
	}
	checkForeign(t, l.a)
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
