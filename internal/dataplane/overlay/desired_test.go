package overlay

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/pkg/family"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }

var (
	macA = desired.MustParseMAC("02:00:00:00:00:0a")
	macB = desired.MustParseMAC("02:00:00:00:00:0b")
)

func baseInput() Input {
	return Input{
		Config: Config{Device: "estvx4", VNI: 4, LocalIP: ip("10.0.0.1"), MTU: 1450, MAC: macA},
		Remotes: []Remote{
			{Node: "b", VTEP: ip("10.0.0.2"), MAC: macB, NodeIPs: []netip.Addr{ip("10.0.0.2"), ip("fd10::2")}},
			{Node: "self", VTEP: ip("10.0.0.1"), MAC: macA, NodeIPs: []netip.Addr{ip("10.0.0.1")}},
		},
		ClusterPrefixes: []netip.Prefix{pfx("10.96.0.0/12"), pfx("fd96::/108")},
	}
}

func route(table int, dst string) desired.Route {
	return desired.Route{Table: table, Dst: pfx(dst), Dev: "estvx4", Scope: desired.ScopeLink, Protocol: desired.ProtocolEstuary}
}

func TestDesired(t *testing.T) {
	v4 := Subnet{Name: "a", CIDR: pfx("10.244.0.0/16"), NATOutgoing: true}
	v6 := Subnet{Name: "b", CIDR: pfx("fd00::/64"), NATOutgoing: true}
	flood := desired.FDB{Dev: "estvx4", Dst: ip("10.0.0.2")}
	uni := desired.FDB{Dev: "estvx4", MAC: macB, Dst: ip("10.0.0.2")}
	for _, tc := range []struct {
		name      string
		edit      func(*Input)
		routes    []desired.Route
		rules     []desired.Rule
		neighs    []desired.Neigh
		fdb       []desired.FDB
		nat4      []netip.Prefix
		nat6      []netip.Prefix
		exempt4   []netip.Prefix
		noRemotes bool
	}{
		{
			name:   "v4",
			edit:   func(in *Input) { in.Subnets = []Subnet{v4}; in.LocalPods = []netip.Addr{ip("10.244.3.3")} },
			routes: []desired.Route{route(1001, "10.244.0.0/16"), route(1002, "10.0.0.2/32")},
			rules: []desired.Rule{
				{Priority: 1002, Table: 1002, Src: pfx("10.244.0.0/16")},
				{Priority: 1001, Table: 1001, Family: family.IPv4},
			},
			neighs:  []desired.Neigh{{Dev: "estvx4", IP: ip("10.244.3.3"), Proxy: true}},
			fdb:     []desired.FDB{flood, uni},
			nat4:    []netip.Prefix{pfx("10.244.0.0/16")},
			exempt4: []netip.Prefix{pfx("10.96.0.0/12"), pfx("10.244.0.0/16")},
		},
		{
			name: "v6",
			edit: func(in *Input) {
				in.Subnets = []Subnet{v6}
				in.LocalPods = []netip.Addr{ip("fd00::5")}
				in.NodeIPs = []netip.Addr{ip("10.0.0.1"), ip("fd10::1")}
			},
			routes: []desired.Route{route(1001, "fd00::/64"), route(1002, "fd10::2/128")},
			rules: []desired.Rule{
				{Priority: 1002, Table: 1002, Src: pfx("fd00::/64")},
				{Priority: 1001, Table: 1001, Family: family.IPv6},
			},
			neighs: []desired.Neigh{{Dev: "estvx4", IP: ip("fd00::5"), Proxy: true}, {Dev: "estvx4", IP: ip("fd10::1"), Proxy: true}},
			fdb:    []desired.FDB{flood, uni},
			nat6:   []netip.Prefix{pfx("fd00::/64")},
		},
		{
			name: "dual stack, NAT off for v6",
			edit: func(in *Input) {
				s6 := v6
				s6.NATOutgoing = false
				in.Subnets = []Subnet{v4, s6}
			},
			routes: []desired.Route{
				route(1001, "10.244.0.0/16"), route(1002, "10.0.0.2/32"),
				route(1001, "fd00::/64"), route(1002, "fd10::2/128"),
			},
			rules: []desired.Rule{
				{Priority: 1002, Table: 1002, Src: pfx("10.244.0.0/16")},
				{Priority: 1002, Table: 1002, Src: pfx("fd00::/64")},
				{Priority: 1001, Table: 1001, Family: family.IPv4},
				{Priority: 1001, Table: 1001, Family: family.IPv6},
			},
			fdb:     []desired.FDB{flood, uni},
			nat4:    []netip.Prefix{pfx("10.244.0.0/16")},
			exempt4: []netip.Prefix{pfx("10.96.0.0/12"), pfx("10.244.0.0/16")},
		},
		{
			name: "no remotes, NAT off",
			edit: func(in *Input) {
				s := v4
				s.NATOutgoing = false
				in.Subnets, in.Remotes = []Subnet{s}, nil
			},
			routes: []desired.Route{route(1001, "10.244.0.0/16")},
			rules: []desired.Rule{
				{Priority: 1002, Table: 1002, Src: pfx("10.244.0.0/16")},
				{Priority: 1001, Table: 1001, Family: family.IPv4},
			},
		},
		{
			name: "a remote whose VTEP is of the other family is left out",
			edit: func(in *Input) {
				in.Subnets = []Subnet{v4}
				in.Remotes = append(in.Remotes, Remote{Node: "c", VTEP: ip("fd10::3"), MAC: macB, NodeIPs: []netip.Addr{ip("10.0.0.3")}})
			},
			routes: []desired.Route{route(1001, "10.244.0.0/16"), route(1002, "10.0.0.2/32")},
			rules: []desired.Rule{
				{Priority: 1002, Table: 1002, Src: pfx("10.244.0.0/16")},
				{Priority: 1001, Table: 1001, Family: family.IPv4},
			},
			fdb:     []desired.FDB{flood, uni},
			nat4:    []netip.Prefix{pfx("10.244.0.0/16")},
			exempt4: []netip.Prefix{pfx("10.96.0.0/12"), pfx("10.244.0.0/16")},
		},
		{
			name:   "no flood",
			edit:   func(in *Input) { in.Subnets = []Subnet{v4}; in.NoFlood = true },
			routes: []desired.Route{route(1001, "10.244.0.0/16"), route(1002, "10.0.0.2/32")},
			rules: []desired.Rule{
				{Priority: 1002, Table: 1002, Src: pfx("10.244.0.0/16")},
				{Priority: 1001, Table: 1001, Family: family.IPv4},
			},
			fdb:     []desired.FDB{uni},
			nat4:    []netip.Prefix{pfx("10.244.0.0/16")},
			exempt4: []netip.Prefix{pfx("10.96.0.0/12"), pfx("10.244.0.0/16")},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := baseInput()
			tc.edit(&in)
			s, nat := Desired(in)
			same(t, "routes", s.Routes, tc.routes)
			same(t, "rules", s.Rules, tc.rules)
			same(t, "neighbours", s.Neighs, tc.neighs)
			same(t, "fdb", s.FDB, tc.fdb)
			if len(s.Addrs) != 0 {
				t.Errorf("addresses = %v, want none", s.Addrs)
			}
			same(t, "nat4 sources", nat.IPv4.Sources, tc.nat4)
			same(t, "nat6 sources", nat.IPv6.Sources, tc.nat6)
			if tc.exempt4 != nil {
				same(t, "nat4 exempt", nat.IPv4.Exempt, tc.exempt4)
			}
			for _, f := range []desired.NATFamily{nat.IPv4, nat.IPv6} {
				if !f.Empty() && f.Device != "estvx4" {
					t.Errorf("nat device = %q", f.Device)
				}
			}
			s2, nat2 := Desired(in)
			if !slices.Equal(s.Routes, s2.Routes) || !nat.IPv4.Equal(nat2.IPv4) {
				t.Error("Desired is not deterministic")
			}
		})
	}
}

func same[T comparable](t *testing.T, what string, got, want []T) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s = %v, want %v", what, got, want)
		return
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s = %v, lacks %v", what, got, w)
		}
	}
}

func TestDeviceName(t *testing.T) {
	for _, tc := range []struct {
		id   uint32
		want string
	}{{0, "estvx0"}, {4, "estvx4"}, {4096, "estvx4096"}, {^uint32(0), "estvx4294967295"}} {
		if got := DeviceName(tc.id); got != tc.want || len(got) > 15 {
			t.Errorf("DeviceName(%d) = %q, want %q", tc.id, got, tc.want)
		}
	}
}

func TestStableMAC(t *testing.T) {
	seen := map[desired.MAC]string{}
	for _, n := range []string{"node-1", "node-2", "worker-a", "", strings.Repeat("x", 300)} {
		m := StableMAC(n)
		if m != StableMAC(n) {
			t.Errorf("StableMAC(%q) not stable", n)
		}
		if m[0]&0x02 == 0 || m.IsMulticast() || m.IsZero() {
			t.Errorf("StableMAC(%q) = %s: want locally administered unicast", n, m)
		}
		if other, dup := seen[m]; dup {
			t.Errorf("StableMAC(%q) = StableMAC(%q)", n, other)
		}
		seen[m] = n
	}
}

func TestMTUFor(t *testing.T) {
	for _, tc := range []struct {
		parent int
		v6     bool
		want   int
	}{{1500, false, 1450}, {1500, true, 1430}, {9000, false, 8950}, {9000, true, 8930}} {
		if got := MTUFor(tc.parent, tc.v6); got != tc.want {
			t.Errorf("MTUFor(%d, %v) = %d, want %d", tc.parent, tc.v6, got, tc.want)
		}
	}
}

// TestOwnership: the overlay owns its tables, rules and device, and none of
// podnet's objects even though they carry estuary's protocol, nor the
// underlay's.
func TestOwnership(t *testing.T) {
	o := Ownership()
	podRoute := desired.Route{Table: 1000, Dst: pfx("10.244.1.1/32"), Dev: "est0123456789a", Protocol: desired.ProtocolEstuary}
	podDefault := desired.Route{Table: desired.MainTable, Dst: pfx("0.0.0.0/0"), Protocol: desired.ProtocolEstuary}
	for _, r := range []desired.Route{podRoute, podDefault} {
		if o.OwnsRoute(r) {
			t.Errorf("owns %v", r)
		}
	}
	if !o.OwnsRoute(desired.Route{Table: 1001, Dst: pfx("10.0.0.0/8")}) || !o.OwnsRoute(route(1002, "10.0.0.2/32")) {
		t.Error("does not own its tables")
	}
	if o.OwnsRule(desired.Rule{Priority: 1000, Table: 1000}) || !o.OwnsRule(desired.Rule{Priority: 1001, Table: 1001}) {
		t.Error("rule ownership wrong")
	}
	// Tables and priorities 1100-1999 are the underlay's per-subnet ones.
	if o.OwnsRoute(route(1100, "192.168.60.0/24")) || o.OwnsRoute(route(1999, "0.0.0.0/0")) ||
		o.OwnsRule(desired.Rule{Priority: 1100, Table: 1100}) || o.OwnsRule(desired.Rule{Priority: 1999, Table: 1999}) {
		t.Error("owns the underlay's tables or rules")
	}
	if o.OwnsNeigh(desired.Neigh{Dev: "est0123456789a", IP: ip("10.244.1.1"), Proxy: true}) ||
		!o.OwnsNeigh(desired.Neigh{Dev: "estvx4", IP: ip("10.244.1.1"), Proxy: true}) {
		t.Error("neighbour ownership wrong")
	}
	if o.OwnsAddr(desired.Addr{Dev: "estvx4", Prefix: pfx("10.1.1.1/24"), Scope: desired.ScopeLink, NoPrefixRoute: true}) {
		t.Error("owns an address")
	}
	plan := o.Diff(desired.State{}, desired.State{Routes: []desired.Route{podRoute}, Rules: []desired.Rule{{Priority: 1000, Table: 1000}}})
	if !plan.Empty() {
		t.Errorf("diff deletes podnet's objects:\n%s", plan)
	}
}
