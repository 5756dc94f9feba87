package ops

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/internal/sysctl"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

func TestEnsureVXLANDeviceMAC(t *testing.T) {
	h := newNS(t)
	newVXLAN(t, h, 42)
	mac := desired.MustParseMAC("02:11:22:33:44:55")
	v := VXLAN{Name: "estvx", VNI: 42, Port: 4789, Parent: "eth1", LocalIP: ip("192.168.50.1"), MTU: 1450, MAC: mac}
	got, err := h.Devices().EnsureVXLAN(v)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != mac.String() {
		t.Fatalf("MAC %s, want %s", got, mac)
	}
	v.VNI = 43 // re-created: the MAC must survive
	if got, err = h.Devices().EnsureVXLAN(v); err != nil || got.String() != mac.String() {
		t.Fatalf("after re-creation: MAC %s err %v, want %s", got, err, mac)
	}
	if l, _ := h.Links().Get("estvx"); l.Up {
		t.Error("a re-created device came up before its settings were written")
	}
}

func TestParentLookups(t *testing.T) {
	h := newNS(t)
	apply(t, h, desired.Plan{AddAddrs: []desired.Addr{{Dev: "eth1", Prefix: pfx("192.168.50.1/24")}}})
	if name, err := h.Routes().DefaultLink(family.IPv4); err != nil || name != "" {
		t.Fatalf("no default route: %q, %v", name, err)
	}
	if err := h.Routes().AddOnlink(desired.Route{Dst: pfx("0.0.0.0/0"), Gw: ip("192.168.50.254"), Dev: "eth1"}); err != nil {
		t.Fatal(err)
	}
	if name, err := h.Routes().DefaultLink(family.IPv4); err != nil || name != "eth1" {
		t.Fatalf("default route link %q, %v; want eth1", name, err)
	}
	// Default routes in other tables are not the main table's.
	apply(t, h, desired.Plan{AddRoutes: []desired.Route{
		{Table: 1001, Dst: pfx("0.0.0.0/0"), Dev: "est1", Scope: desired.ScopeLink},
		{Table: 100, Dst: pfx("0.0.0.0/0"), Dev: "est1", Scope: desired.ScopeLink},
	}})
	if name, err := h.Routes().DefaultLink(family.IPv4); err != nil || name != "eth1" {
		t.Fatalf("default route link with other tables' defaults %q, %v; want eth1", name, err)
	}
	if name, err := h.Routes().DefaultLink(family.IPv6); err != nil || name != "" {
		t.Fatalf("no IPv6 default route: %q, %v", name, err)
	}
	if rs, err := h.Routes().table(unix.AF_INET, 1500); err != nil || len(rs) != 0 {
		t.Fatalf("routes of a table that does not exist: %v, %v", rs, err)
	}
	if rs, err := h.Routes().table(unix.AF_INET, 1001); err != nil || len(rs) != 1 || rs[0].Table != 1001 {
		t.Fatalf("routes of table 1001: %v, %v", rs, err)
	}
	la, err := h.Addrs().OfLink("eth1")
	if err != nil || !slices.Equal(la.Addrs, []netip.Addr{ip("192.168.50.1")}) || la.MTU != 1500 {
		t.Fatalf("eth1 = %+v, %v", la, err)
	}
	ls, err := h.Addrs().ByLink()
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(ls, func(l LinkAddrs) bool { return l.Name == "lo" }); i < 0 || len(ls[i].Addrs) != 0 {
		t.Errorf("lo must be listed without global addresses: %+v", ls)
	}
	if i := slices.IndexFunc(ls, func(l LinkAddrs) bool { return l.Name == "eth1" }); i < 0 ||
		!slices.Equal(ls[i].Addrs, la.Addrs) || ls[i].Index != la.Index || ls[i].MTU != la.MTU {
		t.Errorf("eth1 listed as %+v, alone as %+v", ls, la)
	}
	if !slices.IsSortedFunc(ls, func(a, b LinkAddrs) int { return a.Index - b.Index }) {
		t.Errorf("links not in index order: %+v", ls)
	}
}

func TestWatchNeighMisses(t *testing.T) {
	h := newNS(t)
	newVXLAN(t, h, 42)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	misses := make(chan netip.Addr, 8)
	done := make(chan error, 1)
	go func() { done <- h.Neighs().WatchMisses(ctx, "estvx", func(a netip.Addr) { misses <- a }) }()
	// A datagram to an unresolved on-link address makes the kernel ask.
	if err := sysctl.Write(h.c.ns, []sysctl.Setting{{Key: "net/ipv4/neigh/estvx/app_solicit", Value: "1"}}); err != nil {
		t.Fatal(err)
	}
	apply(t, h, desired.Plan{AddRoutes: []desired.Route{{Dst: pfx("10.244.0.0/16"), Dev: "estvx", Scope: desired.ScopeLink}}})
	target := ip("10.244.7.7")
	deadline := time.After(10 * time.Second)
	for got := false; !got; {
		if err := nsrun.Do(h.c.ns, func() error { return sendUDP(target) }); err != nil {
			t.Fatal(err)
		}
		select {
		case a := <-misses:
			got = a == target
		case <-time.After(200 * time.Millisecond): // the subscription may not be up yet
		case <-deadline:
			t.Fatal("no miss reported")
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WatchNeighMisses after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("WatchNeighMisses did not return after its context ended")
	}
}

func natOf(dev string, src []string, exempt ...string) desired.NATFamily {
	f := desired.NATFamily{Device: dev}
	for _, s := range src {
		f.Sources = append(f.Sources, pfx(s))
	}
	for _, s := range exempt {
		f.Exempt = append(f.Exempt, pfx(s))
	}
	return f
}

func TestNATEnsure(t *testing.T) {
	path := nstest.New(t)
	n, err := OpenNAT(path)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	foreign := &nftables.Table{Name: "kube-proxy", Family: nftables.TableFamilyIPv4}
	n.conn.AddTable(foreign)
	if err := n.conn.Flush(); err != nil {
		t.Skipf("kernel lacks nf_tables: %v", err)
	}
	want := desired.NAT{
		IPv4: natOf("estvx1", []string{"10.244.0.0/16", "10.245.0.0/16"}, "10.244.0.0/15", "10.96.0.0/12", "0.0.0.0/32"),
		IPv6: natOf("estvx1", []string{"fd00::/64"}, "fd00::/48"),
	}
	ensure := func(w desired.NAT, changed ...family.Family) {
		t.Helper()
		got, err := n.Ensure(w)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, changed) {
			t.Fatalf("changed %v, want %v", got, changed)
		}
	}
	ensure(want, family.IPv4, family.IPv6)
	ensure(want)
	want.IPv4.Exempt = append(want.IPv4.Exempt, pfx("192.0.2.0/24"))
	ensure(want, family.IPv4)
	want.IPv4.Device = "estvx2"
	ensure(want, family.IPv4)
	ensure(want)
	want.IPv4.SkipMark = 1 << 14
	ensure(want, family.IPv4)
	ensure(want)
	want.IPv4.SkipMark = 1 << 12
	ensure(want, family.IPv4)
	ensure(want)
	ensure(desired.NAT{IPv4: want.IPv4}, family.IPv6)
	ensure(desired.NAT{}, family.IPv4)
	ensure(desired.NAT{})
	ts, err := n.conn.ListTables()
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 1 || ts[0].Name != "kube-proxy" {
		t.Fatalf("tables left: %v", ts)
	}
}

func sendUDP(dst netip.Addr) error {
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(netip.AddrPortFrom(dst, 9)))
	if err != nil {
		return err
	}
	defer func() { _ = c.Close() }()
	_, err = c.Write([]byte("x"))
	return err
}

// TestParentSkipsScopeLinkAddresses: a pod address written onto the NIC with
// scope link (the underlay's enhanced address) sorts before the node's own
// address in the kernel's list; it must never be taken for the node's.
func TestParentSkipsScopeLinkAddresses(t *testing.T) {
	h := newNS(t)
	apply(t, h, desired.Plan{AddAddrs: []desired.Addr{
		{Dev: "eth1", Prefix: pfx("192.168.50.1/24")},
		{Dev: "eth1", Prefix: pfx("10.77.100.10/24"), Scope: desired.ScopeLink, NoPrefixRoute: true},
	}})
	la, err := h.Addrs().OfLink("eth1")
	if err != nil || !slices.Equal(la.Addrs, []netip.Addr{ip("192.168.50.1")}) {
		t.Fatalf("eth1 = %+v, %v; want only 192.168.50.1 (not the scope-link 10.77.100.10)", la, err)
	}
	ls, err := h.Addrs().ByLink()
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(ls, func(l LinkAddrs) bool { return l.Name == "eth1" }); i < 0 ||
		!slices.Equal(ls[i].Addrs, la.Addrs) {
		t.Fatalf("eth1 listed as %+v; want only 192.168.50.1", ls)
	}
}
