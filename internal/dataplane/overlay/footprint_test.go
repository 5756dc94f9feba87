package overlay

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// TestDesiredFootprint checks the package doc's kernel footprint: with P
// local pods, N remote nodes of A addresses each, S overlay subnets and U
// underlay subnets (G with a gateway), the overlay wants 2N FDB entries,
// P proxy neighbours, S + N*A + U + G routes and S + 1 rules, and none of
// it grows with the number of remote pods.
func TestDesiredFootprint(t *testing.T) {
	const P, N, A, S, U, G = 7, 5, 1, 3, 4, 2
	in := Input{Config: Config{Device: "estvx4", VNI: 4, LocalIP: ip("10.0.0.1"), MAC: macA}}
	for i := range P {
		in.LocalPods = append(in.LocalPods, netip.AddrFrom4([4]byte{10, 244, 0, byte(10 + i)}))
	}
	in.Remotes = append(in.Remotes, Remote{Node: "self", VTEP: ip("10.0.0.1"), MAC: macA, NodeIPs: []netip.Addr{ip("10.0.0.1")}})
	for i := range N {
		vtep := netip.AddrFrom4([4]byte{10, 0, 0, byte(2 + i)})
		in.Remotes = append(in.Remotes, Remote{Node: fmt.Sprint("n", i), VTEP: vtep,
			MAC: desired.MAC{2, 0, 0, 0, 1, byte(i)}, NodeIPs: []netip.Addr{vtep}})
	}
	for i := range S {
		in.Subnets = append(in.Subnets, Subnet{Name: fmt.Sprint("s", i), CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte(i), 0}), 24)})
	}
	for i := range U {
		u := Underlay{CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 168, byte(i), 0}), 24)}
		if i < G {
			u.Gateway = netip.AddrFrom4([4]byte{192, 168, byte(i), 1})
		}
		in.Underlays = append(in.Underlays, u)
	}
	s, _ := Desired(in)
	if got, want := len(s.FDB), 2*N; got != want {
		t.Errorf("FDB entries = %d, want 2N = %d", got, want)
	}
	if got := len(s.Neighs); got != P {
		t.Errorf("proxy neighbours = %d, want P = %d", got, P)
	}
	if got, want := len(s.Routes), S+N*A+U+G; got != want {
		t.Errorf("routes = %d, want S+N*A+U+G = %d", got, want)
	}
	if got, want := len(s.Rules), S+1; got != want {
		t.Errorf("rules = %d, want S+1 = %d", got, want)
	}
	in.NoFlood = true
	if s, _ := Desired(in); len(s.FDB) != N {
		t.Errorf("FDB entries without flooding = %d, want N = %d", len(s.FDB), N)
	}
}
