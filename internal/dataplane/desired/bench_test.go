package desired

import (
	"net/netip"
	"testing"
)

// benchState builds a node-sized state: routes to pods and overlay subnets,
// proxy and permanent neighbours.
func benchState(routes, neighs int) State {
	var s State
	for i := range routes {
		a := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		s.Routes = append(s.Routes, Route{Table: 1000, Dst: netip.PrefixFrom(a, 32), Dev: "est1",
			Scope: ScopeLink, Protocol: ProtocolEstuary})
	}
	for i := range neighs {
		a := netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})
		s.Neighs = append(s.Neighs, Neigh{Dev: "estvx", IP: a, Proxy: true})
	}
	return s
}

func BenchmarkDiff(b *testing.B) {
	desired := benchState(5000, 2000)
	actual := benchState(5000, 2000)
	actual.Routes = actual.Routes[:4990] // a few changes, as after one pod event
	b.ReportAllocs()
	for b.Loop() {
		if p := Diff(desired, actual); len(p.AddRoutes) != 10 {
			b.Fatalf("plan has %d route adds", len(p.AddRoutes))
		}
	}
}
