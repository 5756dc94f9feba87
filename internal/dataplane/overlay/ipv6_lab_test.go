package overlay

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/nstest/nspod"
)

// lab6 is two nodes and an external host on one switch whose pods hold
// IPv6 addresses only: either dual-stack nodes, whose tunnel runs over
// IPv4 (the default route's family), or IPv6-only nodes, whose tunnel runs
// over IPv6.
type lab6 struct {
	sw, ext string
	a, b    *node
	vtep6   bool
}

// newLab6 builds the lab: with vtep6 the nodes and the external host have
// IPv6 addresses only, else both families with an IPv4 default route.
func newLab6(t *testing.T, vtep6 bool) *lab6 {
	t.Helper()
	if !ipv6Kernel() {
		t.Skip("kernel without IPv6")
	}
	l := &lab6{sw: nstest.NewSwitch(t), vtep6: vtep6}
	l.ext = nstest.New(t)
	extAddrs := []string{extIP6.String() + "/64"}
	if !vtep6 {
		extAddrs = append(extAddrs, extIP.String()+"/24")
	}
	nstest.Plug(t, l.sw, l.ext, "ext", extAddrs...)
	l.a = l.newNode(t, "node-a", 1, 10)
	l.b = l.newNode(t, "node-b", 2, 20)
	return l
}

func (l *lab6) newNode(t *testing.T, name string, i, host int) *node {
	t.Helper()
	n := &node{name: name, ns: nstest.New(t), ip6: netip.MustParseAddr(fmt.Sprintf("fd77::%d", i))}
	addrs := []string{n.ip6.String() + "/64"}
	if !l.vtep6 {
		n.ip = netip.MustParseAddr(fmt.Sprintf("10.77.0.%d", i))
		addrs = append(addrs, n.ip.String()+"/24")
	}
	nstest.Plug(t, l.sw, n.ns, name, addrs...)
	if l.vtep6 {
		nstest.IP(t, n.ns, "-6", "route", "add", "default", "via", extIP6.String())
	} else {
		nstest.IP(t, n.ns, "route", "add", "default", "via", extIP.String())
	}
	n.podIPs = []netip.Addr{netip.MustParseAddr(fmt.Sprintf("fd00:244::%d:%d", i, host))}
	n.pod, n.hostVth = nspod.Plumb(t, n.ns, name,
		n.podIPs[0])
	agent, err := NewAgent(n.ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)
	n.agent = agent
	return n
}

// vtep is n's tunnel endpoint: its address of the tunnel's family.
func (l *lab6) vtep(n *node) netip.Addr {
	if l.vtep6 {
		return n.ip6
	}
	return n.ip
}

// input is n's overlay input with one IPv6 subnet, as the daemon computes
// it: the tunnel from ResolveParent, other as the only remote.
func (l *lab6) input(t *testing.T, n, other *node, nat bool) Input {
	t.Helper()
	p, err := n.agent.ResolveParent(ParentSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Link != "eth0" || p.IP != l.vtep(n) || p.MTU != 1500 {
		t.Fatalf("%s: ResolveParent = %+v, want eth0 %s 1500", n.name, p, l.vtep(n))
	}
	own, remote := []netip.Addr{n.ip6}, []netip.Addr{other.ip6}
	if !l.vtep6 {
		own, remote = append(own, n.ip), append(remote, other.ip)
	}
	return Input{
		Config: Config{
			Device: DeviceName(netID), VNI: netID, Parent: p.Link, LocalIP: p.IP,
			MTU: MTUFor(p.MTU, p.IP.Is6()), MAC: StableMAC(n.name),
		},
		LocalPods:       n.podIPs,
		NodeIPs:         own,
		Remotes:         []Remote{{Node: other.name, VTEP: l.vtep(other), MAC: StableMAC(other.name), NodeIPs: remote}},
		Subnets:         []Subnet{{Name: "pods6", CIDR: subnet6, NATOutgoing: nat}},
		ClusterPrefixes: []netip.Prefix{subnet6},
	}
}

// TestOverlayIPv6 carries IPv6 pods across two nodes over VXLAN, once with
// an IPv4 tunnel (dual-stack nodes) and once with an IPv6 one (IPv6-only
// nodes): pod to pod both ways with the pods' own addresses, node to pod
// with the node's own address (no NAT; the reply rides rule 1002 back into
// the tunnel), pod to the outside masqueraded to the node's address while
// the subnet has natOutgoing and with the pod's own address once it has
// not, and remote pods resolved by the answerer alone.
func TestOverlayIPv6(t *testing.T) {
	for _, c := range []struct {
		name  string
		vtep6 bool
	}{{"IPv4 VTEP, dual-stack nodes", false}, {"IPv6 VTEP, IPv6-only nodes", true}} {
		t.Run(c.name, func(t *testing.T) {
			l := newLab6(t, c.vtep6)
			inA, inB := l.input(t, l.a, l.b, true), l.input(t, l.b, l.a, true)
			for i := range 2 {
				planA, planB := apply(t, l.a, inA), apply(t, l.b, inB)
				if i == 1 && (!planA.Empty() || !planB.Empty()) {
					t.Errorf("second Apply changed:\n%s%s", planA, planB)
				}
			}
			l.checkKernel(t, l.a, inA)
			a6, b6 := l.a.podIPs[0], l.b.podIPs[0]
			wantPeer(t, "pod A -> pod B", l.a.pod, b6, l.b.pod, a6)
			wantPeer(t, "pod B -> pod A", l.b.pod, a6, l.a.pod, b6)
			wantPeer(t, "node A -> pod B", l.a.ns, b6, l.b.pod, l.a.ip6)
			wantPeer(t, "pod B -> node A", l.b.pod, l.a.ip6, l.a.ns, b6)
			wantPeer(t, "pod A -> external (natOutgoing)", l.a.pod, extIP6, l.ext, l.a.ip6)

			// Without natOutgoing the outside sees the pod, and routes its
			// reply to the pod's node.
			inA = l.input(t, l.a, l.b, false)
			apply(t, l.a, inA)
			if nft := nstest.Exec(t, l.a.ns, "nft", "list", "tables"); strings.Contains(nft, "ip6 estuary") {
				t.Errorf("natOutgoing off: ip6 estuary table left:\n%s", nft)
			}
			nstest.IP(t, l.ext, "-6", "route", "add", a6.String()+"/128", "via", l.a.ip6.String())
			wantPeer(t, "pod A -> external (no natOutgoing)", l.a.pod, extIP6, l.ext, a6)
			wantPeer(t, "external -> pod A (no natOutgoing)", l.ext, a6, l.a.pod, extIP6)

			t.Run("answerer", func(t *testing.T) { l.testAnswerer(t, inA, l.input(t, l.b, l.a, true)) })
		})
	}
}

// checkKernel checks n's tunnel device (its local address, the MTU of the
// tunnel's family), the IPv6 policy rules and tables, the proxy entries
// and the masquerade of the IPv6 subnet.
func (l *lab6) checkKernel(t *testing.T, n *node, in Input) {
	t.Helper()
	mtu := "mtu 1450"
	if l.vtep6 {
		mtu = "mtu 1430"
	}
	link := nstest.IP(t, n.ns, "-d", "link", "show", in.Device)
	for _, want := range []string{"vxlan id 7", "local " + l.vtep(n).String(), "dev eth0", mtu, "nolearning"} {
		if !strings.Contains(link, want) {
			t.Errorf("%s: device lacks %q:\n%s", n.name, want, link)
		}
	}
	other := l.b
	if n == l.b {
		other = l.a
	}
	for _, want := range []struct{ out, substr string }{
		{nstest.IP(t, n.ns, "-6", "rule", "show"), "1000:\tfrom all lookup 1000"},
		{nstest.IP(t, n.ns, "-6", "rule", "show"), "1001:\tfrom all lookup 1001"},
		{nstest.IP(t, n.ns, "-6", "rule", "show"), "1002:\tfrom " + subnet6.String() + " lookup 1002"},
		{nstest.IP(t, n.ns, "-6", "route", "show", "table", "1000"), n.podIPs[0].String() + " dev " + n.hostVth},
		{nstest.IP(t, n.ns, "-6", "route", "show", "table", "1001"), subnet6.String() + " dev " + in.Device},
		{nstest.IP(t, n.ns, "-6", "route", "show", "table", "1002"), other.ip6.String() + " dev " + in.Device},
		{nstest.IP(t, n.ns, "-6", "neigh", "show", "proxy"), n.podIPs[0].String() + " dev " + in.Device},
		{nstest.IP(t, n.ns, "-6", "neigh", "show", "proxy"), n.ip6.String() + " dev " + in.Device},
		{nstest.Run(t, "bridge", "-n", basename(n.ns), "fdb", "show", "dev", in.Device), "dst " + l.vtep(other).String()},
		{nstest.Exec(t, n.ns, "nft", "list", "table", "ip6", "estuary"), "masquerade"},
		{nstest.Exec(t, n.ns, "cat", "/proc/sys/net/ipv6/conf/"+in.Device+"/proxy_ndp"), "1"},
	} {
		if !strings.Contains(want.out, want.substr) {
			t.Errorf("%s: want %q in:\n%s", n.name, want.substr, want.out)
		}
	}
	if nft := nstest.Exec(t, n.ns, "nft", "list", "tables"); strings.Contains(nft, "table ip estuary") {
		t.Errorf("%s: an IPv4 NAT table without IPv4 subnets:\n%s", n.name, nft)
	}
}

// testAnswerer drops the flood entries and every resolved neighbour: the
// answerer alone resolves the remote IPv6 pod, with a REACHABLE entry
// carrying its node's VTEP MAC.
func (l *lab6) testAnswerer(t *testing.T, inA, inB Input) {
	inA.NoFlood, inB.NoFlood = true, true
	apply(t, l.a, inA)
	apply(t, l.b, inB)
	macs := map[netip.Addr]desired.MAC{}
	for _, n := range []*node{l.a, l.b} {
		nstest.IP(t, n.ns, "-6", "neigh", "flush", "dev", inA.Device)
		for _, ip := range append([]netip.Addr{n.ip6}, n.podIPs...) {
			macs[ip] = StableMAC(n.name)
		}
	}
	lookup := func(ip netip.Addr) (desired.MAC, bool) { m, ok := macs[ip]; return m, ok }
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, n := range []*node{l.a, l.b} {
		n.agent.OnError = func(err error) { t.Errorf("%s: answerer: %v", n.name, err) }
		wg.Go(func() { _ = n.agent.Answer(ctx, inA.Device, lookup) })
	}
	defer func() {
		cancel()
		if !waitTimeout(&wg, 5*time.Second) {
			t.Error("Answer did not return after its context ended")
		}
	}()
	b6 := l.b.podIPs[0]
	wantPeer(t, "pod A -> pod B (answered)", l.a.pod, b6, l.b.pod, l.a.podIPs[0])
	neigh := nstest.IP(t, l.a.ns, "-6", "neigh", "show", b6.String(), "dev", inA.Device)
	if !strings.Contains(neigh, "lladdr "+StableMAC(l.b.name).String()) || strings.Contains(neigh, "PERMANENT") {
		t.Errorf("neighbour of %s on node A = %q, want lladdr %s, not permanent", b6, neigh, StableMAC(l.b.name))
	}
}
