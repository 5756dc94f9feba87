package ipam

import (
	"net/netip"

	"github.com/estuary-cni/estuary/pkg/family"
)

// The rules of a subnet's window and of subnets that share addresses live
// here once: the allocator enforces them on AddSubnet and UpdateSubnet, and
// the admission webhook applies the same functions to Subnet objects before
// they are stored, each wording its own refusal.

// Window returns the allocatable window [start, end] of prefix p for the
// configured start and end: a zero start is the first address after the
// network address, a zero end the last address before the IPv4 broadcast
// address (for IPv6, the last address of the prefix). A valid start or end is
// returned as given.
func Window(p netip.Prefix, start, end netip.Addr) (netip.Addr, netip.Addr) {
	p = p.Masked()
	if !start.IsValid() {
		start = p.Addr().Next()
	}
	if !end.IsValid() {
		end = family.LastAddr(p)
		if p.Addr().Is4() {
			end = end.Prev()
		}
	}
	return start, end
}

// Footprint is what the sharing rule sees of a subnet: its network, its
// prefix, its window with the defaults applied (see Window) and its gateway
// (invalid when unset).
type Footprint struct {
	Network    string
	Prefix     netip.Prefix
	Start, End netip.Addr
	Gateway    netip.Addr
}

// Holds reports whether a lies in f's window.
func (f Footprint) Holds(a netip.Addr) bool {
	return a.IsValid() && f.Start.Compare(a) <= 0 && a.Compare(f.End) <= 0
}

// Conflict names one way two subnets break the sharing rule.
type Conflict uint8

// The conflicts, in the order Footprint.Conflicts reports them.
const (
	// ConflictNetwork: the prefixes overlap and the subnets belong to
	// different networks.
	ConflictNetwork Conflict = iota + 1
	// ConflictPrefix: the prefixes of one network overlap without being
	// identical.
	ConflictPrefix
	// ConflictWindow: the windows of subnets sharing one prefix overlap.
	ConflictWindow
	// ConflictHoldsGateway: the subnet's window holds the other's gateway,
	// which is not its own.
	ConflictHoldsGateway
	// ConflictGatewayInside: the subnet's gateway, not the other's, lies in
	// the other's window, which may hand it out.
	ConflictGatewayInside
)

// Conflicts returns every way f and o break the rule for subnets that share
// addresses, in the order of the Conflict constants, and nil when they may
// coexist: subnets of different networks never overlap; subnets of one
// network overlap only with an identical prefix, and then their windows are
// disjoint and neither window holds the other's gateway. So every
// allocatable address belongs to one subnet only. Subnets whose prefixes do
// not overlap never conflict; ConflictNetwork and ConflictPrefix are each
// reported alone.
func (f Footprint) Conflicts(o Footprint) []Conflict {
	switch {
	case !f.Prefix.Overlaps(o.Prefix):
		return nil
	case f.Network != o.Network:
		return []Conflict{ConflictNetwork}
	case f.Prefix != o.Prefix:
		return []Conflict{ConflictPrefix}
	}
	var out []Conflict
	if f.Start.Compare(o.End) <= 0 && o.Start.Compare(f.End) <= 0 {
		out = append(out, ConflictWindow)
	}
	if f.Holds(o.Gateway) && o.Gateway != f.Gateway {
		out = append(out, ConflictHoldsGateway)
	}
	if o.Holds(f.Gateway) && o.Gateway != f.Gateway {
		out = append(out, ConflictGatewayInside)
	}
	return out
}
