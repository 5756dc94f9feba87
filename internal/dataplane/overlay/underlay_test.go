package overlay

import (
	"net/netip"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/pkg/family"
)

func throw(dst string) desired.Route {
	return desired.Route{Table: 1002, Dst: pfx(dst), Type: desired.RouteThrow, Protocol: desired.ProtocolEstuary}
}

// Underlay subnets go into table 1002 (overlay sources only), each gateway
// thrown back to the node's routing; only families the overlay carries.
func TestDesiredUnderlays(t *testing.T) {
	in := baseInput()
	in.Subnets = []Subnet{{Name: "a", CIDR: pfx("10.244.0.0/16"), NATOutgoing: true}}
	in.Underlays = []Underlay{
		{CIDR: pfx("192.168.60.0/24"), Gateway: ip("192.168.60.1")},
		{CIDR: pfx("10.90.0.7/24")},                                 // BGP, no gateway; masked
		{CIDR: pfx("192.168.60.0/24"), Gateway: ip("192.168.60.1")}, // twice
		{CIDR: pfx("192.168.61.0/24"), Gateway: ip("10.0.0.2")},     // gateway outside: no throw
		{CIDR: pfx("10.0.0.0/24"), Gateway: ip("10.0.0.2")},         // gateway is a node: its tunnel route stays
		{CIDR: pfx("fd60::/64")},                                    // no IPv6 overlay: left out
		{},
	}
	s, _ := Desired(in)
	same(t, "routes", s.Routes, []desired.Route{
		route(1001, "10.244.0.0/16"), route(1002, "10.0.0.2/32"),
		route(1002, "192.168.60.0/24"), throw("192.168.60.1/32"), route(1002, "10.90.0.0/24"),
		route(1002, "192.168.61.0/24"), route(1002, "10.0.0.0/24"),
	})
	same(t, "rules", s.Rules, []desired.Rule{
		{Priority: 1002, Table: 1002, Src: pfx("10.244.0.0/16")},
		{Priority: 1001, Table: 1001, Family: family.IPv4},
	})
	keys := map[desired.RouteKey]bool{}
	for _, r := range s.Routes {
		if keys[r.Key()] {
			t.Errorf("two routes for %v", r.Key())
		}
		keys[r.Key()] = true
	}
}

// The natOutgoing underlay subnets join the overlay's sources and are exempt
// as destinations; the kube-proxy mark rides along.
func TestDesiredUnderlayNAT(t *testing.T) {
	in := baseInput()
	in.Subnets = []Subnet{{Name: "a", CIDR: pfx("10.244.0.0/16")}, {Name: "b", CIDR: pfx("10.245.0.0/16"), NATOutgoing: true}}
	in.UnderlayNAT = []netip.Prefix{pfx("192.168.60.0/24"), pfx("fd60::/64")}
	in.KubeProxyMark = 0x4000
	_, nat := Desired(in)
	same(t, "nat4 sources", nat.IPv4.Sources, []netip.Prefix{pfx("10.245.0.0/16"), pfx("192.168.60.0/24")})
	same(t, "nat4 exempt", nat.IPv4.Exempt, []netip.Prefix{pfx("10.96.0.0/12"), pfx("10.244.0.0/16"),
		pfx("10.245.0.0/16"), pfx("192.168.60.0/24")})
	same(t, "nat6 sources", nat.IPv6.Sources, []netip.Prefix{pfx("fd60::/64")})
	if nat.IPv4.SkipMark != 0x4000 || nat.IPv6.SkipMark != 0x4000 || nat.IPv4.Device != "estvx4" {
		t.Errorf("nat = %s; want mark 0x4000 and device estvx4 in both families", nat)
	}
	in.UnderlayNAT, in.Subnets[1].NATOutgoing = nil, false
	if _, nat := Desired(in); !nat.IPv4.Empty() || !nat.IPv6.Empty() {
		t.Errorf("nat = %s; want none without natOutgoing subnets", nat)
	}
}
