package ops

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

var allFDB = Scope{FDBDevice: func(string) bool { return true }}

// newNS opens a handle on a fresh namespace holding the veth pairs
// est1<->est1p and eth1<->eth1p, all up.
func newNS(t *testing.T) *Handle {
	t.Helper()
	path := nstest.New(t)
	h, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	for _, pair := range [][2]string{{"est1", "est1p"}, {"eth1", "eth1p"}} {
		if err := h.Devices().EnsureVeth(pair[0], pair[1], 0); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// newVXLAN creates estvx on eth1 or skips when the kernel has no VXLAN.
func newVXLAN(t *testing.T, h *Handle, vni uint32) {
	t.Helper()
	apply(t, h, desired.Plan{AddAddrs: []desired.Addr{{Dev: "eth1", Prefix: pfx("192.168.50.1/24")}}})
	if _, err := ensureVXLANUp(h, "estvx", vni, 4789, "eth1", ip("192.168.50.1"), 1450); err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) {
			t.Skipf("kernel lacks VXLAN: %v", err)
		}
		t.Fatal(err)
	}
}

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }

func apply(t *testing.T, h *Handle, p desired.Plan) {
	t.Helper()
	if err := h.Apply(p); err != nil {
		t.Fatalf("apply:\n%s\nerror: %v", p, err)
	}
}

func read(t *testing.T, h *Handle) desired.State {
	t.Helper()
	s, err := h.Read(allFDB)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func has[T comparable](t *testing.T, in []T, want ...T) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(in, w) {
			t.Errorf("kernel lacks %v; has %v", w, in)
		}
	}
}

func hasNot[T comparable](t *testing.T, in []T, gone ...T) {
	t.Helper()
	for _, g := range gone {
		if slices.Contains(in, g) {
			t.Errorf("kernel still has %v", g)
		}
	}
}

func canon(rs []desired.Route) []desired.Route {
	out := make([]desired.Route, len(rs))
	for i, r := range rs {
		out[i] = r.Canonical()
	}
	return out
}

func TestRoutes(t *testing.T) {
	h := newNS(t)
	p := desired.ProtocolEstuary
	routes := []desired.Route{
		{Table: 1000, Dst: pfx("10.0.0.5/32"), Dev: "est1", Scope: desired.ScopeLink, Protocol: p},
		{Table: 1001, Dst: pfx("10.1.0.0/16"), Dev: "est1", Protocol: p},
		{Table: 1100, Dst: pfx("10.2.0.1/32"), Type: desired.RouteThrow, Protocol: p},
		{Table: 1000, Dst: pfx("fd00::5/128"), Dev: "est1", Protocol: p},
		{Table: 1100, Dst: pfx("fd00:2::1/128"), Type: desired.RouteThrow, Protocol: p},
		{Table: 1100, Dst: pfx("0.0.0.0/0"), Dev: "eth1", Gw: ip("192.168.50.254"), Protocol: p},
	}
	apply(t, h, desired.Plan{
		AddAddrs:  []desired.Addr{{Dev: "eth1", Prefix: pfx("192.168.50.1/24")}},
		AddRoutes: routes,
	})
	apply(t, h, desired.Plan{AddRoutes: routes}) // a second add is a no-op
	has(t, canon(read(t, h).Routes), canon(routes)...)

	moved := desired.Route{Table: 1000, Dst: pfx("10.0.0.5/32"), Dev: "eth1", Scope: desired.ScopeLink, Protocol: p}
	apply(t, h, desired.Plan{AddRoutes: []desired.Route{moved}, DelRoutes: routes[2:5]})
	apply(t, h, desired.Plan{DelRoutes: routes[2:5]}) // a second delete is a no-op
	got := canon(read(t, h).Routes)
	has(t, got, moved.Canonical())
	hasNot(t, got, canon(append(routes[:1:1], routes[2:5]...))...)
}

func TestRules(t *testing.T) {
	h := newNS(t)
	rules := []desired.Rule{
		{Priority: 1000, Table: 1000},
		{Priority: 1002, Table: 1002, Mark: 0x20, Mask: 0x20},
		{Priority: 1100, Table: 1100, Src: pfx("10.1.0.0/16"), Mask: 0x20},
		{Priority: 1101, Table: 1101, Src: pfx("fd00:1::/64"), Mark: 0x7},
		{Priority: 1000, Table: 1000, Family: family.IPv6},
	}
	apply(t, h, desired.Plan{AddRules: rules})
	apply(t, h, desired.Plan{AddRules: rules})
	got := read(t, h).Rules
	for i, r := range rules {
		rules[i] = r.Canonical()
	}
	has(t, got, rules...)
	has(t, got, desired.Rule{Priority: 32766, Table: desired.MainTable, Family: family.IPv4})

	krs, err := h.c.nl.RuleList(unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	for _, kr := range krs {
		if kr.Priority == 1100 && (kr.Mask == nil || *kr.Mask != 0x20 || kr.Mark != 0 || kr.Src.String() != "10.1.0.0/16") {
			t.Errorf("rule 1100 in kernel: %s mark %#x mask %v", kr, kr.Mark, kr.Mask)
		}
	}

	apply(t, h, desired.Plan{DelRules: rules[1:3]})
	apply(t, h, desired.Plan{DelRules: rules[1:3]})
	got = read(t, h).Rules
	hasNot(t, got, rules[1:3]...)
	has(t, got, rules[0], rules[3], rules[4])
}

func TestNeighbours(t *testing.T) {
	h := newNS(t)
	mac := desired.MustParseMAC("ee:ee:ee:ee:ee:ee")
	neighs := []desired.Neigh{
		{Dev: "est1", IP: ip("169.254.1.1"), MAC: mac, Permanent: true},
		{Dev: "est1", IP: ip("fe80::ecee:eeff:feee:eeee"), MAC: mac, Permanent: true},
		{Dev: "eth1", IP: ip("10.2.0.7"), Proxy: true},
		{Dev: "eth1", IP: ip("fd00:2::7"), Proxy: true},
	}
	apply(t, h, desired.Plan{AddNeighs: neighs})
	apply(t, h, desired.Plan{AddNeighs: neighs})
	has(t, read(t, h).Neighs, neighs...)

	idx, err := h.Links().Index("eth1")
	if err != nil {
		t.Fatal(err)
	}
	proxies, err := h.c.nl.NeighProxyList(idx, unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	if len(proxies) != 1 || proxies[0].Flags&netlink.NTF_PROXY == 0 || !proxies[0].IP.Equal(ip("10.2.0.7").AsSlice()) {
		t.Errorf("proxy entries on eth1: %v", proxies)
	}

	newMAC := desired.MustParseMAC("02:00:00:00:00:09")
	changed := desired.Neigh{Dev: "est1", IP: ip("169.254.1.1"), MAC: newMAC, Permanent: true}
	apply(t, h, desired.Plan{AddNeighs: []desired.Neigh{changed}, DelNeighs: neighs[2:]})
	apply(t, h, desired.Plan{DelNeighs: neighs[2:]})
	got := read(t, h).Neighs
	has(t, got, changed, neighs[1])
	hasNot(t, got, neighs[0], neighs[2], neighs[3])
}

func TestFDB(t *testing.T) {
	h := newNS(t)
	newVXLAN(t, h, 42)
	mac := desired.MustParseMAC("02:00:00:00:00:02")
	entries := []desired.FDB{
		{Dev: "estvx", Dst: ip("192.168.50.2")},
		{Dev: "estvx", Dst: ip("192.168.50.3")},
		{Dev: "estvx", MAC: mac, Dst: ip("192.168.50.2")},
	}
	apply(t, h, desired.Plan{AddFDB: entries})
	apply(t, h, desired.Plan{AddFDB: entries})
	got := read(t, h).FDB
	has(t, got, entries...)
	if len(got) != len(entries) {
		t.Errorf("fdb has %d entries, want %d: %v", len(got), len(entries), got)
	}

	moved := desired.FDB{Dev: "estvx", MAC: mac, Dst: ip("192.168.50.3")}
	apply(t, h, desired.Plan{AddFDB: []desired.FDB{moved}, DelFDB: entries[1:2]})
	apply(t, h, desired.Plan{DelFDB: entries[1:2]})
	got = read(t, h).FDB
	has(t, got, entries[0], moved)
	hasNot(t, got, entries[1], entries[2])
}

func TestAddrs(t *testing.T) {
	h := newNS(t)
	addrs := []desired.Addr{
		{Dev: "eth1", Prefix: pfx("10.2.0.254/24"), Scope: desired.ScopeLink, NoPrefixRoute: true},
		{Dev: "eth1", Prefix: pfx("fd00:2::fe/64"), Scope: desired.ScopeUniverse, NoPrefixRoute: true},
	}
	apply(t, h, desired.Plan{AddAddrs: addrs})
	apply(t, h, desired.Plan{AddAddrs: addrs})
	s := read(t, h)
	has(t, s.Addrs, addrs...)
	for _, r := range s.Routes {
		if r.Dst == pfx("10.2.0.0/24") || r.Dst == pfx("fd00:2::/64") {
			t.Errorf("noprefixroute address has a prefix route: %s", r)
		}
	}
	apply(t, h, desired.Plan{DelAddrs: addrs})
	apply(t, h, desired.Plan{DelAddrs: addrs})
	hasNot(t, read(t, h).Addrs, addrs...)
}

func TestEnsureVXLAN(t *testing.T) {
	h := newNS(t)
	newVXLAN(t, h, 42)
	before, err := h.c.nl.LinkByName("estvx")
	if err != nil {
		t.Fatal(err)
	}
	mac, err := ensureVXLANUp(h, "estvx", 42, 4789, "eth1", ip("192.168.50.1"), 1450)
	if err != nil {
		t.Fatal(err)
	}
	same, err := h.c.nl.LinkByName("estvx")
	if err != nil {
		t.Fatal(err)
	}
	if same.Attrs().Index != before.Attrs().Index || mac.String() != before.Attrs().HardwareAddr.String() {
		t.Fatalf("second EnsureVXLAN recreated the device: index %d -> %d", before.Attrs().Index, same.Attrs().Index)
	}
	vx := same.(*netlink.Vxlan)
	if vx.VxlanId != 42 || vx.Port != 4789 || vx.Learning || vx.MTU != 1450 || vx.Flags&(1<<0) == 0 {
		t.Fatalf("vxlan attributes: vni %d port %d learning %v mtu %d flags %v", vx.VxlanId, vx.Port, vx.Learning, vx.MTU, vx.Flags)
	}

	if _, err := ensureVXLANUp(h, "estvx", 42, 4789, "eth1", ip("192.168.50.1"), 1400); err != nil {
		t.Fatal(err)
	}
	if l, _ := h.c.nl.LinkByName("estvx"); l.Attrs().Index != before.Attrs().Index || l.Attrs().MTU != 1400 {
		t.Fatalf("MTU change: index %d mtu %d", l.Attrs().Index, l.Attrs().MTU)
	}

	if _, err := ensureVXLANUp(h, "estvx", 43, 4789, "eth1", ip("192.168.50.1"), 1400); err != nil {
		t.Fatal(err)
	}
	l, err := h.c.nl.LinkByName("estvx")
	if err != nil {
		t.Fatal(err)
	}
	if l.Attrs().Index == before.Attrs().Index || l.(*netlink.Vxlan).VxlanId != 43 {
		t.Fatalf("VNI change not applied by recreating: index %d vni %d", l.Attrs().Index, l.(*netlink.Vxlan).VxlanId)
	}

	if err := h.Links().Delete("estvx"); err != nil {
		t.Fatal(err)
	}
	if err := h.Links().Delete("estvx"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

func TestEnsureVethAndBridge(t *testing.T) {
	h := newNS(t)
	if err := h.Devices().EnsureVeth("est1", "est1p", 1400); err != nil {
		t.Fatal(err)
	}
	if err := h.Devices().EnsureBridge("estbr"); err != nil {
		t.Fatal(err)
	}
	if err := h.Devices().EnsureBridge("estbr"); err != nil {
		t.Fatal(err)
	}
	if err := h.Devices().EnsureVeth("estbr", "x", 0); err == nil {
		t.Fatal("EnsureVeth accepted an existing bridge")
	}
	for _, name := range []string{"est1", "est1p"} {
		l, err := h.c.nl.LinkByName(name)
		if err != nil {
			t.Fatal(err)
		}
		if l.Attrs().MTU != 1400 {
			t.Errorf("%s mtu %d, want 1400", name, l.Attrs().MTU)
		}
	}
}

// TestDeleteLinkGoneAfterLookup: a link found and then removed by someone
// else (the kernel tearing down a pod's namespace takes its veth's host
// end with it) is deleted successfully, not reported as "no such device".
func TestDeleteLinkGoneAfterLookup(t *testing.T) {
	h := newNS(t)
	link, err := h.c.nl.LinkByName("est1")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.nl.LinkDel(link); err != nil {
		t.Fatal(err)
	}
	if err := h.Links().deleteLink(link); err != nil {
		t.Fatalf("deleting a link already gone: %v", err)
	}
	if _, err := h.c.nl.LinkByName("est1"); err == nil {
		t.Fatal("est1 still exists")
	}
}

func TestApplyReportsFailure(t *testing.T) {
	h := newNS(t)
	err := h.Apply(desired.Plan{AddRoutes: []desired.Route{{Table: 1000, Dst: pfx("10.0.0.5/32"), Dev: "est9"}}})
	if err == nil || err.Error() != "add route 10.0.0.5/32 table 1000 dev est9: link est9 not found" {
		t.Fatalf("error = %v", err)
	}
}

// A plan naming a missing device fails on each of its writes there, naming
// the device, and still carries out everything else, however often and in
// whatever order the names occur.
func TestApplyWithMissingDevice(t *testing.T) {
	h := newNS(t)
	err := h.Apply(desired.Plan{
		AddAddrs: []desired.Addr{{Dev: "est1", Prefix: pfx("10.2.0.1/32")}},
		AddRoutes: []desired.Route{
			{Table: 1000, Dst: pfx("10.0.0.5/32"), Dev: "est9", Scope: desired.ScopeLink},
			{Table: 1000, Dst: pfx("10.0.0.6/32"), Dev: "est1", Scope: desired.ScopeLink},
			{Table: 1000, Dst: pfx("10.0.0.7/32"), Dev: "est9", Scope: desired.ScopeLink},
		},
		AddNeighs: []desired.Neigh{{Dev: "est9", IP: ip("10.0.0.5"), Proxy: true}, {Dev: "eth1", IP: ip("10.0.0.8"), Proxy: true}},
		DelRoutes: []desired.Route{{Table: 1000, Dst: pfx("10.0.0.9/32"), Dev: "est9"}},
	})
	want := "add route 10.0.0.5/32 table 1000 dev est9: link est9 not found\n" +
		"add route 10.0.0.7/32 table 1000 dev est9: link est9 not found\n" +
		"add proxy neighbour 10.0.0.5 dev est9: link est9 not found"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v\nwant %s", err, want)
	}
	s := read(t, h)
	if !slices.ContainsFunc(s.Routes, func(r desired.Route) bool {
		return r.Table == 1000 && r.Dst == pfx("10.0.0.6/32") && r.Dev == "est1"
	}) {
		t.Errorf("route on est1 missing: %v", s.Routes)
	}
	has(t, s.Neighs, desired.Neigh{Dev: "eth1", IP: ip("10.0.0.8"), Proxy: true})
	if !slices.ContainsFunc(s.Addrs, func(a desired.Addr) bool { return a.Dev == "est1" && a.Prefix == pfx("10.2.0.1/32") }) {
		t.Errorf("address on est1 missing: %v", s.Addrs)
	}
}

// A link's alternative name does not name it in a plan.
func TestApplyIgnoresAltNames(t *testing.T) {
	h := newNS(t)
	link, err := h.c.nl.LinkByName("est1")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.c.nl.LinkAddAltName(link, "estalt"); err != nil {
		t.Skipf("kernel lacks alternative names: %v", err)
	}
	err = h.Apply(desired.Plan{AddNeighs: []desired.Neigh{{Dev: "estalt", IP: ip("10.0.0.5"), Proxy: true}}})
	if err == nil || err.Error() != "add proxy neighbour 10.0.0.5 dev estalt: link estalt not found" {
		t.Fatalf("error = %v", err)
	}
}

func TestDeleteOnMissingDeviceSucceeds(t *testing.T) {
	h := newNS(t)
	err := h.Apply(desired.Plan{
		DelRoutes: []desired.Route{{Table: 1000, Dst: pfx("10.0.0.5/32"), Dev: "est9"}},
		DelNeighs: []desired.Neigh{{Dev: "est9", IP: ip("10.0.0.5"), Proxy: true}},
		DelFDB:    []desired.FDB{{Dev: "est9", Dst: ip("192.168.50.2")}},
		DelAddrs:  []desired.Addr{{Dev: "est9", Prefix: pfx("10.2.0.254/24")}},
		DelRules:  []desired.Rule{{Priority: 1999, Table: 1999}},
	})
	if err != nil {
		t.Fatalf("deleting what is gone: %v", err)
	}
}

// ensureVXLANUp makes the VXLAN device with these attributes exist and be
// up, and returns its MAC.
func ensureVXLANUp(h *Handle, name string, vni uint32, port int, parent string, local netip.Addr,
	mtu int) (net.HardwareAddr, error) {
	mac, err := h.Devices().EnsureVXLAN(VXLAN{Name: name, VNI: vni, Port: port, Parent: parent, LocalIP: local, MTU: mtu})
	if err != nil {
		return nil, err
	}
	return mac, h.Links().SetUp(name)
}
