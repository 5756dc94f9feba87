package desired

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/estuary-cni/estuary/pkg/family"
)

var (
	mac1 = MustParseMAC("02:00:00:00:00:01")
	mac2 = MustParseMAC("02:00:00:00:00:02")
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }

func podRoute(dst, dev string) Route {
	return Route{Table: 1000, Dst: pfx(dst), Dev: dev, Scope: ScopeLink, Type: RouteUnicast, Protocol: ProtocolEstuary}
}

func TestDiffRoutes(t *testing.T) {
	mainOwned := Route{Table: MainTable, Dst: pfx("10.9.0.0/16"), Dev: "eth0", Type: RouteUnicast, Protocol: ProtocolEstuary}
	mainForeign := Route{Table: MainTable, Dst: pfx("10.8.0.0/16"), Dev: "eth0", Type: RouteUnicast, Protocol: 4}
	tests := []struct {
		name            string
		desired, actual []Route
		add, del        []Route
	}{
		{name: "empty"},
		{name: "add missing", desired: []Route{podRoute("10.0.0.5/32", "est1")},
			add: []Route{podRoute("10.0.0.5/32", "est1")}},
		{name: "equal is no-op", desired: []Route{podRoute("10.0.0.5/32", "est1")},
			actual: []Route{podRoute("10.0.0.5/32", "est1")}},
		{name: "changed device replaces without delete",
			desired: []Route{podRoute("10.0.0.5/32", "est2")}, actual: []Route{podRoute("10.0.0.5/32", "est1")},
			add: []Route{podRoute("10.0.0.5/32", "est2")}},
		{name: "stale in owned table deleted", actual: []Route{podRoute("10.0.0.6/32", "est1")},
			del: []Route{podRoute("10.0.0.6/32", "est1")}},
		{name: "stale with our protocol in main deleted", actual: []Route{mainOwned}, del: []Route{mainOwned}},
		{name: "foreign route in main kept", actual: []Route{mainForeign}},
		{name: "protocol defaults to estuary",
			desired: []Route{{Table: 1001, Dst: pfx("10.1.0.0/16"), Dev: "estvx"}},
			add:     []Route{{Table: 1001, Dst: pfx("10.1.0.0/16"), Dev: "estvx", Type: RouteUnicast, Protocol: ProtocolEstuary}}},
		{name: "throw canonical drops dev",
			desired: []Route{{Table: 1100, Dst: pfx("10.2.0.1/32"), Dev: "x", Type: RouteThrow, Protocol: ProtocolEstuary}},
			actual:  []Route{{Table: 1100, Dst: pfx("10.2.0.1/32"), Type: RouteThrow, Protocol: ProtocolEstuary}}},
		{name: "ipv6 scope ignored",
			desired: []Route{{Table: 1000, Dst: pfx("fd00::5/128"), Dev: "est1", Scope: ScopeLink, Protocol: ProtocolEstuary}},
			actual:  []Route{{Table: 1000, Dst: pfx("fd00::5/128"), Dev: "est1", Type: RouteUnicast, Protocol: ProtocolEstuary}}},
		{name: "unmasked destination",
			desired: []Route{podRoute("10.1.2.3/16", "est1")}, actual: []Route{podRoute("10.1.0.0/16", "est1")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Diff(State{Routes: tc.desired}, State{Routes: tc.actual})
			if !slices.Equal(p.AddRoutes, tc.add) || !slices.Equal(p.DelRoutes, tc.del) {
				t.Fatalf("plan:\n%s\nwant add %v del %v", p, tc.add, tc.del)
			}
		})
	}
}

func TestDiffRules(t *testing.T) {
	local := Rule{Priority: 1000, Table: 1000, Family: family.IPv4}
	marked := Rule{Priority: 1002, Table: 1002, Mark: 0x20, Mask: 0x20, Family: family.IPv4}
	subnet := Rule{Priority: 1100, Table: 1100, Src: pfx("10.1.0.0/16"), Mask: 0xff00, Family: family.IPv4}
	mainRule := Rule{Priority: 32766, Table: MainTable, Family: family.IPv4}
	tests := []struct {
		name            string
		desired, actual []Rule
		add, del        []Rule
	}{
		{name: "add all", desired: []Rule{subnet, marked, local}, add: []Rule{local, marked, subnet}},
		{name: "no-op", desired: []Rule{local}, actual: []Rule{local, mainRule}},
		{name: "stale owned deleted, foreign kept", actual: []Rule{marked, mainRule}, del: []Rule{marked}},
		{name: "changed table adds and deletes",
			desired: []Rule{{Priority: 1000, Table: 1001, Family: family.IPv4}}, actual: []Rule{local},
			add: []Rule{{Priority: 1000, Table: 1001, Family: family.IPv4}}, del: []Rule{local}},
		{name: "exact mark gets full mask",
			desired: []Rule{{Priority: 1003, Table: 1003, Mark: 0x1}},
			actual:  []Rule{{Priority: 1003, Table: 1003, Mark: 0x1, Mask: 0xffffffff, Family: family.IPv4}}},
		{name: "family from source",
			desired: []Rule{{Priority: 1101, Table: 1101, Src: pfx("fd00:1::/64")}},
			add:     []Rule{{Priority: 1101, Table: 1101, Src: pfx("fd00:1::/64"), Family: family.IPv6}}},
		{name: "from all v6 is distinct from v4",
			desired: []Rule{local, {Priority: 1000, Table: 1000, Family: family.IPv6}}, actual: []Rule{local},
			add: []Rule{{Priority: 1000, Table: 1000, Family: family.IPv6}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Diff(State{Rules: tc.desired}, State{Rules: tc.actual})
			if !slices.Equal(p.AddRules, tc.add) || !slices.Equal(p.DelRules, tc.del) {
				t.Fatalf("plan:\n%s\nwant add %v del %v", p, tc.add, tc.del)
			}
		})
	}
}

func TestDiffNeighs(t *testing.T) {
	proxy := Neigh{Dev: "estvx", IP: ip("10.1.0.5"), Proxy: true}
	perm := Neigh{Dev: "est1", IP: ip("169.254.1.1"), MAC: mac1, Permanent: true}
	foreign := Neigh{Dev: "eth0", IP: ip("192.168.0.1"), MAC: mac1, Permanent: true}
	dynamic := Neigh{Dev: "est1", IP: ip("10.1.0.9"), MAC: mac2}
	tests := []struct {
		name            string
		desired, actual []Neigh
		add, del        []Neigh
	}{
		{name: "add", desired: []Neigh{perm, proxy}, add: []Neigh{perm, proxy}},
		{name: "proxy ignores mac", desired: []Neigh{{Dev: "estvx", IP: ip("10.1.0.5"), MAC: mac1, Proxy: true}},
			actual: []Neigh{proxy}},
		{name: "changed mac replaces", desired: []Neigh{{Dev: "est1", IP: ip("169.254.1.1"), MAC: mac2, Permanent: true}},
			actual: []Neigh{perm}, add: []Neigh{{Dev: "est1", IP: ip("169.254.1.1"), MAC: mac2, Permanent: true}}},
		{name: "stale owned deleted", actual: []Neigh{perm, proxy}, del: []Neigh{perm, proxy}},
		{name: "foreign device and dynamic kept", actual: []Neigh{foreign, dynamic}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Diff(State{Neighs: tc.desired}, State{Neighs: tc.actual})
			if !slices.Equal(p.AddNeighs, tc.add) || !slices.Equal(p.DelNeighs, tc.del) {
				t.Fatalf("plan:\n%s\nwant add %v del %v", p, tc.add, tc.del)
			}
		})
	}
}

func TestDiffFDB(t *testing.T) {
	flood1 := FDB{Dev: "estvx", Dst: ip("192.168.0.2")}
	flood2 := FDB{Dev: "estvx", Dst: ip("192.168.0.3")}
	uni := FDB{Dev: "estvx", MAC: mac1, Dst: ip("192.168.0.2")}
	moved := FDB{Dev: "estvx", MAC: mac1, Dst: ip("192.168.0.3")}
	foreign := FDB{Dev: "vxlan0", MAC: mac2, Dst: ip("192.168.0.9")}
	tests := []struct {
		name            string
		desired, actual []FDB
		add, del        []FDB
	}{
		{name: "flood entries are one per remote", desired: []FDB{flood1, flood2}, actual: []FDB{flood1},
			add: []FDB{flood2}},
		{name: "stale flood entry deleted", desired: []FDB{flood1}, actual: []FDB{flood1, flood2},
			del: []FDB{flood2}},
		{name: "unicast move replaces", desired: []FDB{moved}, actual: []FDB{uni}, add: []FDB{moved}},
		{name: "foreign device kept", actual: []FDB{foreign}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Diff(State{FDB: tc.desired}, State{FDB: tc.actual})
			if !slices.Equal(p.AddFDB, tc.add) || !slices.Equal(p.DelFDB, tc.del) {
				t.Fatalf("plan:\n%s\nwant add %v del %v", p, tc.add, tc.del)
			}
		})
	}
}

func TestDiffAddrs(t *testing.T) {
	enhanced := Addr{Dev: "eth1", Prefix: pfx("10.2.0.254/24"), Scope: ScopeLink, NoPrefixRoute: true}
	plain := Addr{Dev: "eth1", Prefix: pfx("192.168.0.1/24")}
	tests := []struct {
		name            string
		desired, actual []Addr
		add, del        []Addr
	}{
		{name: "add", desired: []Addr{enhanced}, actual: []Addr{plain}, add: []Addr{enhanced}},
		{name: "stale marked deleted, plain kept", actual: []Addr{enhanced, plain}, del: []Addr{enhanced}},
		{name: "changed scope replaces", desired: []Addr{{Dev: "eth1", Prefix: pfx("10.2.0.254/24"), NoPrefixRoute: true}},
			actual: []Addr{enhanced}, add: []Addr{{Dev: "eth1", Prefix: pfx("10.2.0.254/24"), NoPrefixRoute: true}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := Diff(State{Addrs: tc.desired}, State{Addrs: tc.actual})
			if !slices.Equal(p.AddAddrs, tc.add) || !slices.Equal(p.DelAddrs, tc.del) {
				t.Fatalf("plan:\n%s\nwant add %v del %v", p, tc.add, tc.del)
			}
		})
	}
}

func TestDiffDeterministic(t *testing.T) {
	desired := State{Routes: []Route{podRoute("10.0.0.2/32", "est2"), podRoute("10.0.0.1/32", "est1")}}
	rev := State{Routes: []Route{desired.Routes[1], desired.Routes[0]}}
	a, b := Diff(desired, State{}), Diff(rev, State{})
	if a.String() != b.String() {
		t.Fatalf("order depends on input:\n%s\n%s", a, b)
	}
}

func TestOwnsDevice(t *testing.T) {
	o := DefaultOwnership()
	o.Devices = []string{"vxlan.est"}
	for name, want := range map[string]bool{"est1234": true, "vxlan.est": true, "eth0": false, "": false, "xest": false} {
		if got := o.OwnsDevice(name); got != want {
			t.Errorf("OwnsDevice(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestParseMAC(t *testing.T) {
	if _, err := ParseMAC("00:11:22:33:44:55:66:77"); err == nil {
		t.Fatal("EUI-64 accepted")
	}
	if m := MustParseMAC("02:00:00:00:00:01"); m.String() != "02:00:00:00:00:01" || m.IsMulticast() || m.IsZero() {
		t.Fatalf("bad MAC %s", m)
	}
}

func TestPlanOrder(t *testing.T) {
	desired := State{
		Routes: []Route{podRoute("10.0.0.5/32", "est1")},
		Rules:  []Rule{{Priority: 1000, Table: 1000}},
		Addrs:  []Addr{{Dev: "eth1", Prefix: pfx("10.2.0.254/24"), Scope: ScopeLink, NoPrefixRoute: true}},
	}
	actual := State{
		Routes: []Route{podRoute("10.0.0.6/32", "est1")},
		Rules:  []Rule{{Priority: 1001, Table: 1001, Family: family.IPv4}},
		Addrs:  []Addr{{Dev: "eth1", Prefix: pfx("10.3.0.254/24"), Scope: ScopeLink, NoPrefixRoute: true}},
	}
	want := "add address 10.2.0.254/24 dev eth1 scope 253 noprefixroute\n" +
		"add 10.0.0.5/32 table 1000 dev est1\n" +
		"add rule 1000 ipv4 from all lookup 1000\n" +
		"del rule 1001 ipv4 from all lookup 1001\n" +
		"del 10.0.0.6/32 table 1000 dev est1\n" +
		"del address 10.3.0.254/24 dev eth1 scope 253 noprefixroute\n"
	p := Diff(desired, actual)
	if got := p.String(); got != want {
		t.Fatalf("plan order:\n%s\nwant\n%s", got, want)
	}
	if p.Len() != 6 || p.Empty() || !Diff(desired, desired).Empty() {
		t.Fatalf("Len %d Empty %v", p.Len(), p.Empty())
	}
}

// TestDiffSkipsBusyDevices: nothing on a skipped device is deleted, whatever
// else would own it; the same objects on another device are.
func TestDiffSkipsBusyDevices(t *testing.T) {
	o := OwnerLocalPods.Ownership()
	o.Skip = func(dev string) bool { return dev == "estbusy" }
	actual := State{
		Routes: []Route{podRoute("10.0.0.5/32", "estbusy"), podRoute("10.0.0.6/32", "estidle")},
		Neighs: []Neigh{{Dev: "estbusy", IP: ip("fe80::1"), Proxy: true}},
	}
	all := DefaultOwnership()
	all.Skip = o.Skip
	for _, own := range []Ownership{o, all} {
		p := own.Diff(State{}, actual)
		if len(p.DelRoutes) != 1 || p.DelRoutes[0].Dev != "estidle" || len(p.DelNeighs) != 0 {
			t.Errorf("owner %q: plan\n%s\nwant only the route on estidle deleted", own.Owner, p)
		}
	}
}
