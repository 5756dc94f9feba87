package underlay

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }
func vlan(id int) *int          { return &id }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func oneSubnet(id int, pods ...string) Input {
	s := Subnet{Name: "vlan-a", CIDR: pfx("192.168.60.0/24"), Gateway: ip("192.168.60.1")}
	for _, p := range pods {
		s.LocalPods = append(s.LocalPods, ip(p))
	}
	return Input{
		Uplink:   "eth0",
		Networks: []Network{{Name: "net-a", VLAN: id, Subnets: []Subnet{s}}},
		Cluster:  []SubnetRef{{Name: "vlan-a", CIDR: s.CIDR, Created: t0}},
	}
}

func TestDesiredUntagged(t *testing.T) {
	in := oneSubnet(0, "192.168.60.9", "192.168.60.5", "10.0.0.1", "192.168.60.5")
	table := desired.TableUnderlayFirst + Numbering(in.Cluster)["vlan-a"]
	want := desired.State{
		Rules: []desired.Rule{{Priority: table, Table: table, Src: pfx("192.168.60.0/24")}},
		Routes: []desired.Route{
			{Table: table, Dst: pfx("192.168.60.0/24"), Dev: "eth0", Scope: desired.ScopeLink, Protocol: desired.ProtocolEstuary},
			{Table: table, Dst: pfx("0.0.0.0/0"), Gw: ip("192.168.60.1"), Dev: "eth0", Protocol: desired.ProtocolEstuary},
		},
		Neighs: []desired.Neigh{
			{Dev: "eth0", IP: ip("192.168.60.5"), Proxy: true},
			{Dev: "eth0", IP: ip("192.168.60.9"), Proxy: true},
		},
		Addrs: []desired.Addr{{Dev: "eth0", Prefix: pfx("192.168.60.5/24"), Scope: desired.ScopeLink, NoPrefixRoute: true}},
	}
	if got := Desired(in); !reflect.DeepEqual(got, want) {
		t.Errorf("Desired =\n%+v\nwant\n%+v", got, want)
	}
	hidden := Hidden(in)
	if len(hidden) != 1 || hidden[0] != (desired.Route{Table: LocalTable, Dst: pfx("192.168.60.5/32"), Dev: "eth0",
		Type: RouteLocal, Scope: desired.ScopeHost}) {
		t.Errorf("Hidden = %+v", hidden)
	}
	if d := Devices(in); !reflect.DeepEqual(d, []Device{{Name: "eth0", V4: true}}) {
		t.Errorf("Devices = %+v", d)
	}
	if table < 1100 || table > 1999 {
		t.Errorf("table %d outside 1100-1999", table)
	}
}

func TestDesiredNoLocalPods(t *testing.T) {
	for _, in := range []Input{oneSubnet(0), oneSubnet(5, "10.0.0.1"), {Uplink: "eth0"}} {
		if s := Desired(in); s.Len() != 0 {
			t.Errorf("Desired = %+v, want nothing", s)
		}
		if len(Hidden(in)) != 0 || len(Devices(in)) != 0 {
			t.Errorf("Hidden/Devices not empty for %+v", in)
		}
	}
}

func TestDesiredTagged(t *testing.T) {
	in := oneSubnet(100, "192.168.60.5")
	s := Desired(in)
	for _, r := range s.Routes {
		if r.Dev != "eth0.100" {
			t.Errorf("route on %s, want eth0.100", r.Dev)
		}
	}
	if s.Neighs[0].Dev != "eth0.100" || s.Addrs[0].Dev != "eth0.100" {
		t.Errorf("state not on eth0.100: %+v", s)
	}
	// The subnet's override beats the network's id.
	in.Networks[0].Subnets[0].VLAN = vlan(0)
	if d := Devices(in); len(d) != 1 || d[0].Name != "eth0" || d[0].VLAN != 0 {
		t.Errorf("override 0: Devices = %+v", d)
	}
	in.Networks[0].Subnets[0].VLAN = vlan(4095)
	if s := Desired(in); s.Len() != 0 || len(Problems(in)) != 1 {
		t.Errorf("id 4095: Desired = %+v, Problems = %v", s, Problems(in))
	}
}

func TestVLANName(t *testing.T) {
	for _, tc := range []struct {
		nic  string
		id   int
		want string
	}{
		{"eth0", 0, "eth0"},
		{"eth0", 4094, "eth0.4094"},
		{"enp0s31f6", 100, "enp0s31f6.100"},
		{"ens1f0np0", 4094, "ens1f0np0.4094"},
		{"enp0s31f6ab", 100, "enp0s31f6ab.100"},
	} {
		if got := VLANName(tc.nic, tc.id); got != tc.want {
			t.Errorf("VLANName(%s, %d) = %s, want %s", tc.nic, tc.id, got, tc.want)
		}
	}
	a, b := VLANName("enp175s0f0np0", 4094), VLANName("enp175s0f0np1", 4094)
	for _, n := range []string{a, b} {
		if len(n) > 15 || !strings.HasPrefix(n, "est") || !strings.HasSuffix(n, ".4094") {
			t.Errorf("long name %q: want est<hash>.4094 within 15 bytes", n)
		}
	}
	if a == b || a != VLANName("enp175s0f0np0", 4094) {
		t.Errorf("long names not distinct and stable: %s %s", a, b)
	}
}

func TestSeveralSubnets(t *testing.T) {
	in := Input{
		Uplink: "bond0",
		Networks: []Network{
			{Name: "n1", VLAN: 10, Subnets: []Subnet{
				{Name: "s1", CIDR: pfx("10.1.0.0/24"), Gateway: ip("10.1.0.1"), LocalPods: []netip.Addr{ip("10.1.0.7")}},
				{Name: "s2", CIDR: pfx("10.2.0.0/24"), Gateway: ip("10.2.0.1"), VLAN: vlan(20), LocalPods: []netip.Addr{ip("10.2.0.7")}},
				{Name: "s3", CIDR: pfx("10.3.0.0/24"), Gateway: ip("10.3.0.1")},
			}},
			{Name: "n6", VLAN: 10, Subnets: []Subnet{
				{Name: "s6", CIDR: pfx("fd00:10::/64"), Gateway: ip("fd00:10::1"), LocalPods: []netip.Addr{ip("fd00:10::7")}},
			}},
		},
		NodeAddrs: []desired.Addr{{Dev: "bond0.20", Prefix: pfx("10.2.0.2/24")}},
	}
	s := Desired(in)
	if len(s.Rules) != 3 {
		t.Fatalf("rules = %+v, want 3 (s3 has no local pod)", s.Rules)
	}
	tables := map[int]bool{}
	for _, r := range s.Rules {
		tables[r.Table] = true
		if r.Priority != r.Table {
			t.Errorf("rule %v: priority differs from table", r)
		}
	}
	if len(tables) != 3 {
		t.Errorf("tables not distinct: %v", s.Rules)
	}
	// s2 gets no enhanced address: the node holds 10.2.0.2 on bond0.20;
	// s6 is IPv6 and needs none.
	if len(s.Addrs) != 1 || s.Addrs[0].Prefix != pfx("10.1.0.7/24") || s.Addrs[0].Dev != "bond0.10" {
		t.Errorf("addrs = %+v", s.Addrs)
	}
	var v6Default bool
	for _, r := range s.Routes {
		v6Default = v6Default || (r.Dst == pfx("::/0") && r.Gw == ip("fd00:10::1") && r.Dev == "bond0.10")
	}
	if !v6Default {
		t.Errorf("no IPv6 default route: %+v", s.Routes)
	}
	want := []Device{{Name: "bond0.10", VLAN: 10, V4: true, V6: true}, {Name: "bond0.20", VLAN: 20, V4: true}}
	if d := Devices(in); !reflect.DeepEqual(d, want) {
		t.Errorf("Devices = %+v, want %+v", d, want)
	}
	if !reflect.DeepEqual(Desired(in), s) {
		t.Error("Desired is not deterministic")
	}
}

// TestNumberingStable: a subnet keeps its table when newer subnets come,
// whatever their names, and when unrelated subnets go.
func TestNumberingStable(t *testing.T) {
	var refs []SubnetRef
	for i := range 40 {
		refs = append(refs, SubnetRef{Name: fmt.Sprintf("subnet-%02d", i), Created: t0.Add(time.Duration(i) * time.Minute)})
	}
	base := Numbering(refs[:20])
	grown := Numbering(refs)
	for name, n := range base {
		if grown[name] != n {
			t.Errorf("%s moved from %d to %d when newer subnets came", name, n, grown[name])
		}
	}
	shuffled := slices.Clone(refs)
	slices.Reverse(shuffled)
	if !reflect.DeepEqual(Numbering(shuffled), grown) {
		t.Error("numbering depends on input order")
	}
	seen := map[int]string{}
	for name, n := range grown {
		if other, dup := seen[n]; dup {
			t.Errorf("%s and %s share slot %d", name, other, n)
		}
		if n < 0 || n >= Slots {
			t.Errorf("%s: slot %d out of range", name, n)
		}
		seen[n] = name
	}
	// A colliding newer subnet probes past an older one, never displaces it.
	old := SubnetRef{Name: "old", Created: t0}
	n := Numbering([]SubnetRef{old})["old"]
	for i := 0; ; i++ {
		name := fmt.Sprintf("c%d", i)
		if Numbering([]SubnetRef{{Name: name}})[name] == n {
			got := Numbering([]SubnetRef{{Name: name, Created: t0.Add(time.Hour)}, old})
			if got["old"] != n || got[name] != (n+1)%Slots {
				t.Errorf("collision: %v, want old at %d", got, n)
			}
			break
		}
	}
}

func TestNumberingFull(t *testing.T) {
	var refs []SubnetRef
	for i := range Slots + 5 {
		refs = append(refs, SubnetRef{Name: fmt.Sprintf("s%d", i), Created: t0})
	}
	if got := Numbering(refs); len(got) != Slots {
		t.Errorf("numbered %d subnets, want %d", len(got), Slots)
	}
}

func TestNATSources(t *testing.T) {
	in := oneSubnet(0, "192.168.60.5")
	if got := NATSources(in); len(got) != 0 {
		t.Errorf("NATSources = %v, want none by default", got)
	}
	in.Networks[0].Subnets[0].NATOutgoing = true
	if got := NATSources(in); !reflect.DeepEqual(got, []netip.Prefix{pfx("192.168.60.0/24")}) {
		t.Errorf("NATSources = %v", got)
	}
}

// TestOwnership: the underlay never owns podnet's or the overlay's tables
// and rules.
func TestOwnership(t *testing.T) {
	o := Ownership()
	for _, r := range []desired.Route{
		{Table: 1000, Protocol: desired.ProtocolEstuary}, {Table: 1001}, {Table: 1099}, {Table: desired.MainTable, Protocol: desired.ProtocolEstuary},
	} {
		if o.OwnsRoute(r) {
			t.Errorf("owns %v", r)
		}
	}
	if !o.OwnsRoute(desired.Route{Table: 1100}) || !o.OwnsRoute(desired.Route{Table: 1999}) {
		t.Error("does not own its tables")
	}
	for _, p := range []int{1000, 1001, 1002, 1099, 2000} {
		if o.OwnsRule(desired.Rule{Priority: p}) {
			t.Errorf("owns rule %d", p)
		}
	}
}
