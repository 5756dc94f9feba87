package underlay

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// addForeign writes objects into the node's namespace that the underlay
// does not own, some of them on its uplink and inside its subnet.
func addForeign(t *testing.T, l *lab) {
	t.Helper()
	nstest.IP(t, l.node, "route", "add", "198.51.100.0/24", "via", "192.168.50.1", "dev", "eth0")
	nstest.IP(t, l.node, "rule", "add", "priority", "3000", "from", "192.0.2.0/24", "lookup", "3000")
	nstest.IP(t, l.node, "neigh", "add", "proxy", "192.0.2.7", "dev", "eth0")
	nstest.IP(t, l.node, "neigh", "add", "192.168.60.77", "lladdr", "02:00:00:00:00:77", "dev", "eth0", "nud", "permanent")
	nstest.IP(t, l.node, "addr", "add", "169.254.10.10/16", "dev", "eth0", "scope", "link", "noprefixroute")
}

func checkForeign(t *testing.T, l *lab) {
	t.Helper()
	for _, want := range []struct{ out, substr string }{
		{nstest.IP(t, l.node, "route", "show"), "198.51.100.0/24 via 192.168.50.1"},
		{nstest.IP(t, l.node, "rule", "show"), "3000:\tfrom 192.0.2.0/24 lookup 3000"},
		{nstest.IP(t, l.node, "rule", "show"), "1000:\tfrom all lookup 1000"},
		{nstest.IP(t, l.node, "route", "show", "table", "1000"), podIP.String() + " dev " + l.hostVeth},
		{nstest.IP(t, l.node, "neigh", "show", "proxy"), "192.0.2.7 dev eth0"},
		{nstest.IP(t, l.node, "neigh", "show", "dev", "eth0"), "192.168.60.77 lladdr 02:00:00:00:00:77 PERMANENT"},
		{nstest.IP(t, l.node, "addr", "show", "dev", "eth0"), "169.254.10.10/16 scope link noprefixroute"},
	} {
		if !strings.Contains(want.out, want.substr) {
			t.Errorf("foreign object %q gone:\n%s", want.substr, want.out)
		}
	}
}

func apply(t *testing.T, l *lab, in Input) desired.Plan {
	t.Helper()
	plan, err := l.agent.Apply(context.Background(), in)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return plan
}

func wantPeer(t *testing.T, what, fromNS string, dst netip.Addr, holder string, want netip.Addr) {
	t.Helper()
	if got := nstest.Peer(t, fromNS, dst, holder, 8*time.Second); got != want {
		t.Errorf("%s: %s saw source %s, want %s", what, dst, got, want)
	}
}

// overlayInput is a small overlay on the same node: its device, table 1001
// and 1002 and their rules.
func overlayInput() overlay.Input {
	return overlay.Input{
		Config: overlay.Config{
			Device: overlay.DeviceName(7), VNI: 7, Parent: "eth0", LocalIP: nodeIP,
			MTU: overlay.MTUFor(1500, false), MAC: overlay.StableMAC("node"),
		},
		Subnets:         []overlay.Subnet{{Name: "pods", CIDR: netip.MustParsePrefix("10.244.0.0/16"), NATOutgoing: true}},
		ClusterPrefixes: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), podSubnet},
		Remotes:         []overlay.Remote{{Node: "other", VTEP: netip.MustParseAddr("192.168.50.12"), NodeIPs: []netip.Addr{netip.MustParseAddr("192.168.50.12")}}},
	}
}

func TestUnderlayUntagged(t *testing.T) {
	l := newLab(t)
	addForeign(t, l)
	ovl, err := overlay.NewAgent(l.node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ovl.Close)
	if _, err := ovl.Apply(context.Background(), overlayInput()); err != nil {
		t.Fatalf("overlay Apply: %v", err)
	}

	in := l.input(podIP)
	if plan := apply(t, l, in); plan.Empty() {
		t.Fatal("first Apply changed nothing")
	}
	if plan := apply(t, l, in); !plan.Empty() {
		t.Errorf("second Apply changed:\n%s", plan)
	}
	checkKernel(t, l, in)
	checkForeign(t, l)

	wantPeer(t, "gateway -> pod", l.gw, podIP, l.pod, gwIP)
	wantPeer(t, "pod -> gateway", l.pod, gwIP, l.gw, podIP)
	wantPeer(t, "pod -> external", l.pod, extIP, l.ext, podIP)
	if out := nstest.IP(t, l.gw, "neigh", "show", podIP.String()); !strings.Contains(out, "lladdr "+nodeMAC(t, l)) {
		t.Errorf("gateway resolved %s to %q, want the node's MAC %s", podIP, out, nodeMAC(t, l))
	}

	t.Run("arp sender", func(t *testing.T) { testARPSender(t, l) })
	t.Run("arp helpers", func(t *testing.T) { testARPHelpers(t, l, in) })
	t.Run("beside overlay", func(t *testing.T) { testBesideOverlay(t, l, ovl, in) })
	t.Run("enhanced moves", func(t *testing.T) { testEnhancedMoves(t, l, in) })
	t.Run("link bounce", func(t *testing.T) { testLinkBounce(t, l, in) })
	t.Run("remove", func(t *testing.T) { testRemove(t, l, in) })
}

func nodeMAC(t *testing.T, l *lab) string {
	t.Helper()
	mac, err := l.agent.h.Links().Get("eth0")
	if err != nil {
		t.Fatal(err)
	}
	return mac.MAC.String()
}

// checkKernel checks the node's rule, table, proxy entry, enhanced address
// and sysctls, and that the pod's address is not local to the node.
func checkKernel(t *testing.T, l *lab, in Input) {
	t.Helper()
	table := fmt.Sprint(desired.TableUnderlayFirst + Numbering(in.Cluster)["vlan0-a"])
	for _, want := range []struct{ out, substr string }{
		{nstest.IP(t, l.node, "rule", "show"), table + ":\tfrom 192.168.60.0/24 lookup " + table},
		{nstest.IP(t, l.node, "route", "show", "table", table), "default via 192.168.60.1 dev eth0"},
		{nstest.IP(t, l.node, "route", "show", "table", table), "192.168.60.0/24 dev eth0 proto 229 scope link"},
		{nstest.IP(t, l.node, "neigh", "show", "proxy"), "192.168.60.5 dev eth0"},
		{nstest.IP(t, l.node, "addr", "show", "dev", "eth0"), "192.168.60.5/24 brd 192.168.60.255 scope link noprefixroute"},
		{nstest.IP(t, l.node, "route", "get", podIP.String()), "dev " + l.hostVeth},
	} {
		if !strings.Contains(want.out, want.substr) {
			t.Errorf("want %q in:\n%s", want.substr, want.out)
		}
	}
	if out := nstest.IP(t, l.node, "route", "show", "table", "local"); strings.Contains(out, "local "+podIP.String()+" ") {
		t.Errorf("local route of the enhanced address left:\n%s", out)
	}
	if out := nstest.IP(t, l.node, "route", "show"); strings.Contains(out, "192.168.60.0/24") {
		t.Errorf("subnet route in main:\n%s", out)
	}
	for _, s := range l.agent.Applied() {
		if got := strings.TrimSpace(nstest.Exec(t, l.node, "cat", "/proc/sys/"+s.Key)); got != s.Value {
			t.Errorf("%s = %s, want %s", s.Key, got, s.Value)
		}
	}
	if len(l.agent.Applied()) < 2 {
		t.Errorf("sysctls = %v", l.agent.Applied())
	}
}

// testARPSender: the node's ARP requests for addresses of the pod subnet,
// sent on behalf of the pod, carry the enhanced address as sender.
func testARPSender(t *testing.T, l *lab) {
	mac := nodeMAC(t, l)
	// The neighbours are flushed once the capture listens, so no
	// resolution can happen in between and be missed.
	pkts := captureARP(t, l.gw, "eth0", func() {
		nstest.IP(t, l.node, "neigh", "flush", "dev", "eth0")
		nstest.IP(t, l.gw, "neigh", "flush", "dev", "eth0")
		wantPeer(t, "pod -> external", l.pod, extIP, l.ext, podIP)
	})
	var requests int
	for _, p := range pkts {
		if p.op != 1 || p.senderMAC != mac || !podSubnet.Contains(p.target) {
			continue
		}
		requests++
		if p.sender != podIP {
			t.Errorf("node's ARP request for %s has sender %s, want the enhanced address %s", p.target, p.sender, podIP)
		}
	}
	if requests == 0 {
		t.Errorf("no ARP request from the node for the pod subnet seen: %+v", pkts)
	}
}

// testBesideOverlay: each reconcile leaves the other's objects alone.
func testBesideOverlay(t *testing.T, l *lab, ovl *overlay.Agent, in Input) {
	for range 2 {
		if plan, err := ovl.Apply(context.Background(), overlayInput()); err != nil || !plan.Empty() {
			t.Errorf("overlay Apply beside the underlay: %v, plan:\n%s", err, plan)
		}
		if plan := apply(t, l, in); !plan.Empty() {
			t.Errorf("underlay Apply beside the overlay changed:\n%s", plan)
		}
	}
	for _, want := range []struct{ out, substr string }{
		{nstest.IP(t, l.node, "rule", "show"), "1001:\tfrom all lookup 1001"},
		{nstest.IP(t, l.node, "rule", "show"), "1002:\tfrom 10.244.0.0/16 lookup 1002"},
		{nstest.IP(t, l.node, "route", "show", "table", "1001"), "10.244.0.0/16 dev estvx7"},
		{nstest.IP(t, l.node, "route", "show", "table", "1002"), "192.168.50.12 dev estvx7"},
	} {
		if !strings.Contains(want.out, want.substr) {
			t.Errorf("overlay object %q gone:\n%s", want.substr, want.out)
		}
	}
	checkKernel(t, l, in)
}

// testLinkBounce: taking the uplink down and up drops the tables' routes
// and the proxy entries and brings the enhanced address's local route
// back; Apply repairs all three.
func testLinkBounce(t *testing.T, l *lab, in Input) {
	nstest.IP(t, l.node, "link", "set", "eth0", "down")
	nstest.IP(t, l.node, "link", "set", "eth0", "up")
	// The kernel flushed the link's routes and neighbours, foreign ones
	// too; the node's own configuration brings those back.
	nstest.IP(t, l.node, "route", "replace", "default", "via", "192.168.50.1")
	nstest.IP(t, l.node, "route", "replace", "198.51.100.0/24", "via", "192.168.50.1", "dev", "eth0")
	nstest.IP(t, l.node, "neigh", "replace", "proxy", "192.0.2.7", "dev", "eth0")
	nstest.IP(t, l.node, "neigh", "replace", "192.168.60.77", "lladdr", "02:00:00:00:00:77", "dev", "eth0", "nud", "permanent")
	plan := apply(t, l, in)
	var hidden bool
	for _, r := range plan.DelRoutes {
		hidden = hidden || (r.Table == LocalTable && r.Dst.Addr() == podIP)
	}
	if !hidden || len(plan.AddRoutes) == 0 || len(plan.AddNeighs) == 0 {
		t.Errorf("plan after a link bounce:\n%s", plan)
	}
	checkKernel(t, l, in)
	wantPeer(t, "gateway -> pod after bounce", l.gw, podIP, l.pod, gwIP)
}

// testRemove: without local pods every underlay object goes; the pod's own
// plumbing, the overlay and the foreign objects stay.
func testRemove(t *testing.T, l *lab, in Input) {
	for _, apply := range []func() (desired.Plan, error){
		func() (desired.Plan, error) { return l.agent.Apply(context.Background(), l.input()) },
		func() (desired.Plan, error) { return l.agent.Remove(context.Background(), in) },
	} {
		if _, err := apply(); err != nil {
			t.Fatal(err)
		}
		table := fmt.Sprint(desired.TableUnderlayFirst + Numbering(in.Cluster)["vlan0-a"])
		if out := nstest.IP(t, l.node, "route", "show", "table", table); strings.TrimSpace(out) != "" {
			t.Errorf("table %s left:\n%s", table, out)
		}
		if out := nstest.IP(t, l.node, "rule", "show"); strings.Contains(out, "lookup "+table) {
			t.Errorf("rule left:\n%s", out)
		}
		if out := nstest.IP(t, l.node, "neigh", "show", "proxy"); strings.Contains(out, podIP.String()) {
			t.Errorf("proxy entry left:\n%s", out)
		}
		if out := nstest.IP(t, l.node, "addr", "show", "dev", "eth0"); strings.Contains(out, podIP.String()) {
			t.Errorf("enhanced address left:\n%s", out)
		}
		checkForeign(t, l)
		if out := nstest.IP(t, l.node, "rule", "show"); !strings.Contains(out, "lookup 1001") {
			t.Errorf("overlay rule gone:\n%s", out)
		}
	}
}

// testARPHelpers: the gateway check, duplicate address probe and
// announcement work on the pod subnet's segment.
func testARPHelpers(t *testing.T, l *lab, in Input) {
	ctx := context.Background()
	gwMAC := strings.Fields(nstest.IP(t, l.gw, "-o", "link", "show", "eth0"))
	var want string
	for i, f := range gwMAC {
		if f == "link/ether" {
			want = gwMAC[i+1]
		}
	}
	if mac, err := l.agent.CheckGateway(ctx, in, podIP, 2*time.Second); err != nil || mac.String() != want {
		t.Errorf("CheckGateway = %v, %v; want %s", mac, err, want)
	}
	if mac, err := l.agent.Probe(ctx, in, gwIP, 2*time.Second); err != nil || mac.String() != want {
		t.Errorf("Probe of the gateway's address = %v, %v; want %s", mac, err, want)
	}
	if mac, err := l.agent.Probe(ctx, in, netip.MustParseAddr("192.168.60.99"), 300*time.Millisecond); err != nil || mac != nil {
		t.Errorf("Probe of a free address = %v, %v; want none", mac, err)
	}
	if _, err := l.agent.CheckGateway(ctx, in, netip.MustParseAddr("10.1.1.1"), time.Second); err == nil {
		t.Error("CheckGateway outside every subnet succeeded")
	}
	nstest.IP(t, l.gw, "neigh", "replace", podIP.String(), "lladdr", "02:00:00:00:00:05", "dev", "eth0", "nud", "stale")
	if err := l.agent.Announce(in, podIP); err != nil {
		t.Fatal(err)
	}
	var out string
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out = nstest.IP(t, l.gw, "neigh", "show", podIP.String()); strings.Contains(out, nodeMAC(t, l)) {
			return
		}
	}
	t.Errorf("gateway's entry for %s after Announce = %q, want %s", podIP, out, nodeMAC(t, l))
}

// TestUnderlayTagged applies a tagged subnet beside an untagged one. Without
// 802.1Q support in the kernel the tagged subnet is reported and left out,
// the untagged one still applied, and the test skips with that reason.
func TestUnderlayTagged(t *testing.T) {
	l := newLab(t)
	in := l.input(podIP)
	tagged := netip.MustParsePrefix("192.168.70.0/24")
	in.Networks = append(in.Networks, Network{Name: "vlan100", VLAN: 100, Subnets: []Subnet{{
		Name: "vlan100-a", CIDR: tagged, Gateway: netip.MustParseAddr("192.168.70.1"),
		LocalPods: []netip.Addr{netip.MustParseAddr("192.168.70.5")},
	}}})
	in.Cluster = append(in.Cluster, SubnetRef{Name: "vlan100-a", CIDR: tagged, Created: time.Unix(2, 0)})
	_, err := l.agent.Apply(context.Background(), in)
	if ops.VLANUnsupported(err) {
		checkKernel(t, l, in)
		if out := nstest.IP(t, l.node, "rule", "show"); strings.Contains(out, "192.168.70.0/24") {
			t.Errorf("rule of the tagged subnet written without its device:\n%s", out)
		}
		t.Skipf("skipped: tagged part: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// An administrator's own sub-interface is never deleted.
	nstest.IP(t, l.node, "link", "add", "link", "eth0", "name", "eth0.200", "type", "vlan", "id", "200")
	checkKernel(t, l, in)
	link := nstest.IP(t, l.node, "-d", "link", "show", "eth0.100")
	for _, want := range []string{"vlan protocol 802.1Q id 100", "alias " + desired.VLANMarker, "state UP"} {
		if !strings.Contains(link, want) {
			t.Errorf("eth0.100 lacks %q:\n%s", want, link)
		}
	}
	if out := nstest.IP(t, l.node, "neigh", "show", "proxy"); !strings.Contains(out, "192.168.70.5 dev eth0.100") {
		t.Errorf("no proxy entry on eth0.100:\n%s", out)
	}
	if plan := apply(t, l, in); !plan.Empty() {
		t.Errorf("second Apply changed:\n%s", plan)
	}
	apply(t, l, l.input(podIP))
	if out := nstest.IP(t, l.node, "-o", "link", "show"); strings.Contains(out, "eth0.100") || !strings.Contains(out, "eth0.200") {
		t.Errorf("after the tagged subnet left: want eth0.100 deleted, eth0.200 kept:\n%s", out)
	}
}

// testEnhancedMoves: a lower pod address arriving takes over the enhanced
// address, and leaving gives it back, in one Apply each, with the pod
// reachable throughout.
func testEnhancedMoves(t *testing.T, l *lab, in Input) {
	low := netip.MustParseAddr("192.168.60.3")
	two := l.input(podIP, low)
	for _, step := range []struct {
		in       Input
		has, not netip.Addr
	}{{two, low, podIP}, {in, podIP, low}} {
		apply(t, l, step.in)
		if plan := apply(t, l, step.in); !plan.Empty() {
			t.Errorf("second Apply changed:\n%s", plan)
		}
		addrs := nstest.IP(t, l.node, "addr", "show", "dev", "eth0")
		if !strings.Contains(addrs, step.has.String()+"/24 ") || strings.Contains(addrs, step.not.String()+"/24 ") {
			t.Errorf("want enhanced address %s only:\n%s", step.has, addrs)
		}
		if out := nstest.IP(t, l.node, "route", "show", "table", "local"); strings.Contains(out, "local "+step.has.String()+" ") {
			t.Errorf("local route of %s left:\n%s", step.has, out)
		}
		wantPeer(t, "gateway -> pod", l.gw, podIP, l.pod, gwIP)
	}
	checkKernel(t, l, in)
}
