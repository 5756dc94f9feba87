package overlay

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/nstest/nspod"
)

// An untagged VLAN underlay subnet on the lab's segment, with one pod on
// each node beside the overlay pods.
var (
	vlanSubnet = netip.MustParsePrefix("192.168.60.0/24")
	vlanGw     = netip.MustParseAddr("192.168.60.1")
)

// hybridNode is a lab node that also holds an underlay pod.
type hybridNode struct {
	*node
	upod   string
	uIP    netip.Addr
	uagent *underlay.Agent
}

func newHybridNode(t *testing.T, n *node, host int) *hybridNode {
	t.Helper()
	h := &hybridNode{node: n, uIP: netip.MustParseAddr(fmt.Sprintf("192.168.60.%d", host))}
	h.upod, _ = nspod.Plumb(t, n.ns, "u-"+n.name,
		h.uIP)
	ua, err := underlay.NewAgent(n.ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ua.Close)
	h.uagent = ua
	// Strict reverse-path filtering for the whole node: the tunnel's
	// paths must hold up under it (the device's own 0 does not lower
	// "all").
	nstest.Exec(t, n.ns, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1")
	return h
}

// apply applies the overlay (underlay subnets and pods included, as datapath
// computes them) and the underlay on h, twice, the second time a no-op.
func (h *hybridNode) apply(t *testing.T, l *lab, other *node) Input {
	t.Helper()
	in := l.input(t, h.node, other)
	in.LocalPods = append(in.LocalPods, h.uIP)
	in.Underlays = []Underlay{{CIDR: vlanSubnet, Gateway: vlanGw}}
	in.ClusterPrefixes = append(in.ClusterPrefixes, vlanSubnet)
	uin := underlay.Input{
		Uplink: "eth0",
		Networks: []underlay.Network{{Name: "vlan0", Mode: underlay.ModeVLAN, Subnets: []underlay.Subnet{{
			Name: "vlan0-a", CIDR: vlanSubnet, Gateway: vlanGw, LocalPods: []netip.Addr{h.uIP},
		}}}},
		Cluster:   []underlay.SubnetRef{{Name: "vlan0-a", CIDR: vlanSubnet, Created: time.Unix(1, 0)}},
		NodeAddrs: []desired.Addr{{Dev: "eth0", Prefix: netip.PrefixFrom(h.ip, 24)}},
	}
	for i := range 2 {
		plan := apply(t, h.node, in)
		uplan, err := h.uagent.Apply(context.Background(), uin)
		if err != nil {
			t.Fatalf("%s: underlay Apply: %v", h.name, err)
		}
		if i == 1 && (!plan.Empty() || !uplan.Empty()) {
			t.Errorf("%s: second Apply changed:\n%s%s", h.name, plan, uplan)
		}
	}
	return in
}

// TestOverlayToUnderlayRidesTheTunnel: an overlay pod reaches an underlay
// pod on another node through the tunnel with its own source, and the reply
// comes back the same way; underlay pods still talk over the segment, and
// the node reaches underlay pods through its own routing.
func TestOverlayToUnderlayRidesTheTunnel(t *testing.T) {
	l := newLab(t)
	a, b := newHybridNode(t, l.a, 5), newHybridNode(t, l.b, 6)
	inA := a.apply(t, l, l.b)
	b.apply(t, l, l.a)
	dev := inA.Device
	// The answerers, as the daemon runs them: every pod, overlay or
	// underlay, resolves to the VTEP MAC of its node (the IPInstances).
	// Under a strict "all" rp_filter they are what resolves underlay pods:
	// a broadcast request from a node's address for an underlay pod fails
	// the pod's node's reverse-path check, since that node routes the
	// pod's subnet to node addresses out of its physical link.
	answer(t, dev, map[netip.Addr]desired.MAC{
		a.podIPs[0]: StableMAC(a.name), a.uIP: StableMAC(a.name), a.ip: StableMAC(a.name),
		b.podIPs[0]: StableMAC(b.name), b.uIP: StableMAC(b.name), b.ip: StableMAC(b.name),
	}, a.node, b.node)

	tunnel := nftCounter(t, b.ns, `iifname "`+dev+`" ip daddr `+b.uIP.String())
	segment := nftCounter(t, b.ns, `iifname "eth0" ip saddr `+a.uIP.String()+` ip daddr `+b.uIP.String())
	crossed := nftCounter(t, b.ns, `iifname "`+dev+`" ip saddr `+a.uIP.String())

	// The route the forwarded packets take on A, by source.
	routeVia(t, a.ns, "overlay pod A -> underlay pod B", dev,
		"get", b.uIP.String(), "from", a.podIPs[0].String(), "iif", a.hostVth)
	routeVia(t, a.ns, "underlay pod A -> underlay pod B", "eth0",
		"get", b.uIP.String(), "from", a.uIP.String(), "iif", uVeth(t, a))
	routeVia(t, a.ns, "node A -> underlay pod B", "eth0", "get", b.uIP.String())
	routeVia(t, a.ns, "overlay pod A -> the segment's gateway", "eth0",
		"get", vlanGw.String(), "from", a.podIPs[0].String(), "iif", a.hostVth)

	wantPeer(t, "overlay pod A -> underlay pod B", a.pod, b.uIP, b.upod, a.podIPs[0])
	if n := tunnel(); n == 0 {
		t.Errorf("overlay pod A -> underlay pod B: nothing reached B through %s", dev)
	}
	wantPeer(t, "underlay pod B -> overlay pod A", b.upod, a.podIPs[0], a.pod, b.uIP)
	wantPeer(t, "underlay pod A -> underlay pod B", a.upod, b.uIP, b.upod, a.uIP)
	if n := segment(); n == 0 {
		t.Errorf("underlay pod A -> underlay pod B: nothing reached B on eth0")
	}
	if n := crossed(); n != 0 {
		t.Errorf("underlay pod A -> underlay pod B: %d packets went through %s", n, dev)
	}
	if n := strings.TrimSpace(nstest.IP(t, b.ns, "neigh", "show", "proxy", "dev", dev)); !strings.Contains(n, b.uIP.String()) {
		t.Errorf("node B answers no neighbour request on %s for its underlay pod:\n%s", dev, n)
	}
}

// answer runs the agents' answerers on dev with macs until the test ends.
func answer(t *testing.T, dev string, macs map[netip.Addr]desired.MAC, nodes ...*node) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		if !waitTimeout(&wg, 5*time.Second) {
			t.Error("Answer did not return after its context ended")
		}
	})
	lookup := func(ip netip.Addr) (desired.MAC, bool) { m, ok := macs[ip]; return m, ok }
	for _, n := range nodes {
		n.agent.OnError = func(err error) { t.Logf("%s: answerer: %v", n.name, err) }
		wg.Go(func() { _ = n.agent.Answer(ctx, dev, lookup) })
	}
}

// uVeth returns the host veth of h's underlay pod: the route to it in
// table 1000.
func uVeth(t *testing.T, h *hybridNode) string {
	t.Helper()
	f := strings.Fields(nstest.IP(t, h.ns, "route", "show", "table", "1000", h.uIP.String()))
	for i := range len(f) - 1 {
		if f[i] == "dev" {
			return f[i+1]
		}
	}
	t.Fatalf("%s: no table-1000 route to %s", h.name, h.uIP)
	return ""
}

// routeVia fails t unless `ip route <args>` in ns leaves through dev.
func routeVia(t *testing.T, ns, what, dev string, args ...string) {
	t.Helper()
	out := nstest.IP(t, ns, append([]string{"route"}, args...)...)
	if !strings.Contains(out, " dev "+dev+" ") {
		t.Errorf("%s: route %q, want dev %s", what, strings.TrimSpace(out), dev)
	}
}

var counterRE = regexp.MustCompile(`counter packets (\d+) bytes \d+ comment "(c\d+)"`)

// nftCounter counts, from now on, the packets matching match as they enter
// ns (prerouting, before anything else) in a table of the test's own, and
// returns a reader of the count.
func nftCounter(t *testing.T, ns, match string) func() int {
	t.Helper()
	const table = "esttest-count"
	if !strings.Contains(nstest.Exec(t, ns, "nft", "list", "tables"), table) {
		nstest.Exec(t, ns, "nft", "add", "table", "ip", table)
		nstest.Exec(t, ns, "nft", "add", "chain", "ip", table, "c", "{ type filter hook prerouting priority -300; }")
	}
	id := "c" + strconv.Itoa(strings.Count(nstest.Exec(t, ns, "nft", "list", "table", "ip", table), "counter"))
	nstest.Exec(t, ns, "nft", "add", "rule", "ip", table, "c", match+` counter comment "`+id+`"`)
	return func() int {
		for _, m := range counterRE.FindAllStringSubmatch(nstest.Exec(t, ns, "nft", "list", "table", "ip", table), -1) {
			if m[2] == id {
				n, _ := strconv.Atoi(m[1])
				return n
			}
		}
		t.Fatalf("counter %s (%s) not found", id, match)
		return 0
	}
}
