package desired

import (
	"strings"
	"testing"
)

// TestStepsOrderTheUnderlaysCases: a stale address in the subnet of a new
// one goes before it, the new address's local route right after it, an
// on-link route before the gateway route that needs it; an unrelated stale
// address still goes last.
func TestStepsOrderTheUnderlaysCases(t *testing.T) {
	newAddr := Addr{Dev: "eth0", Prefix: pfx("192.168.60.5/24"), Scope: ScopeLink, NoPrefixRoute: true}
	stale := Addr{Dev: "eth0", Prefix: pfx("192.168.60.9/24"), Scope: ScopeLink, NoPrefixRoute: true}
	other := Addr{Dev: "eth0", Prefix: pfx("10.3.0.254/24"), Scope: ScopeLink, NoPrefixRoute: true}
	onLink := Route{Table: 1100, Dst: pfx("192.168.60.0/24"), Dev: "eth0", Scope: ScopeLink, Protocol: ProtocolEstuary}
	viaGw := Route{Table: 1100, Dst: pfx("0.0.0.0/0"), Gw: ip("192.168.60.1"), Dev: "eth0", Protocol: ProtocolEstuary}
	desired := State{
		Addrs:  []Addr{newAddr},
		Routes: []Route{viaGw, onLink},
		Absent: []Route{LocalRouteOf(newAddr)},
	}
	actual := State{Addrs: []Addr{stale, other}}
	got := OwnerUnderlay.Ownership().Diff(desired, actual).String()
	want := []string{
		"del " + stale.String(),
		"add " + newAddr.String(),
		"del " + LocalRouteOf(newAddr).Canonical().String(),
		"add " + onLink.String(),
		"add " + viaGw.String(),
		"del " + other.String(),
	}
	if got != strings.Join(want, "\n")+"\n" {
		t.Errorf("steps:\n%s\nwant\n%s", got, strings.Join(want, "\n"))
	}
}

// TestDiffAbsentRoutes: an absent route is deleted where the kernel has it
// (its own copy), planned where its address is being added, and left out
// otherwise, so a converged state gives an empty plan.
func TestDiffAbsentRoutes(t *testing.T) {
	a := Addr{Dev: "eth0", Prefix: pfx("192.168.60.5/24"), Scope: ScopeLink, NoPrefixRoute: true}
	local := LocalRouteOf(a)
	kernels := local
	kernels.Protocol = 2 // the kernel's own
	own := OwnerUnderlay.Ownership()
	desired := State{Addrs: []Addr{a}, Absent: []Route{local}}

	p := own.Diff(desired, State{})
	if len(p.DelRoutes) != 1 || p.DelRoutes[0] != local.Canonical() {
		t.Errorf("address being added: DelRoutes = %v, want its local route", p.DelRoutes)
	}
	p = own.Diff(desired, State{Addrs: []Addr{a}, Routes: []Route{kernels}})
	if len(p.DelRoutes) != 1 || p.DelRoutes[0] != kernels.Canonical() || p.Len() != 1 {
		t.Errorf("local route back: plan\n%s\nwant the kernel's route deleted", p)
	}
	if p := own.Diff(desired, State{Addrs: []Addr{a}}); !p.Empty() {
		t.Errorf("converged: plan\n%s", p)
	}
}
