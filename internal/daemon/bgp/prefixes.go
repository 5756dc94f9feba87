package bgp

import (
	"fmt"
	"net/netip"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

const (
	familyIPv4 = bgp.RF_IPv4_UC
	familyIPv6 = bgp.RF_IPv6_UC
)

// DesiredPrefixes is what a node announces for a BGP network: a host route
// (/32 or /128) for every local pod address and each subnet prefix as given
// (masked). IPv4-mapped IPv6 addresses count as IPv4; invalid entries are
// skipped. The result is sorted (IPv4 first) and has no duplicates.
func DesiredPrefixes(localPods []netip.Addr, subnets []netip.Prefix) []netip.Prefix {
	seen := make(map[netip.Prefix]struct{}, len(localPods)+len(subnets))
	for _, a := range localPods {
		if !a.IsValid() {
			continue
		}
		a = a.Unmap().WithZone("")
		seen[netip.PrefixFrom(a, a.BitLen())] = struct{}{}
	}
	for _, p := range subnets {
		if !p.IsValid() {
			continue
		}
		seen[netip.PrefixFrom(p.Addr().Unmap(), unmappedBits(p)).Masked()] = struct{}{}
	}
	return sortedPrefixes(seen)
}

// unmappedBits is the prefix length of p once an IPv4-mapped address is
// unmapped (::ffff:10.0.0.0/104 is 10.0.0.0/8).
func unmappedBits(p netip.Prefix) int {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return p.Bits() - 96
	}
	return p.Bits()
}

// comparePrefixes orders IPv4 before IPv6, then by address, then by length.
func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// path is the GoBGP path announcing (or, withdraw, withdrawing) p with the
// next hop configured for its family.
func (s *Speaker) path(p netip.Prefix, withdraw bool) (*apiutil.Path, error) {
	nlri, err := bgp.NewIPAddrPrefix(p)
	if err != nil {
		return nil, fmt.Errorf("prefix %s: %w", p, err)
	}
	family, nextHop := familyIPv4, s.cfg.NextHopIPv4
	if !nextHop.IsValid() {
		nextHop = netip.IPv4Unspecified()
	}
	if p.Addr().Is6() {
		family, nextHop = familyIPv6, s.cfg.NextHopIPv6
		if !nextHop.IsValid() {
			nextHop = netip.IPv6Unspecified()
		}
	}
	attrs := []bgp.PathAttributeInterface{bgp.NewPathAttributeOrigin(bgp.BGP_ORIGIN_ATTR_TYPE_IGP)}
	if family == familyIPv4 {
		nh, err := bgp.NewPathAttributeNextHop(nextHop)
		if err != nil {
			return nil, fmt.Errorf("prefix %s: next hop %s: %w", p, nextHop, err)
		}
		attrs = append(attrs, nh)
	} else {
		mp, err := bgp.NewPathAttributeMpReachNLRI(family, []bgp.PathNLRI{{NLRI: nlri}}, nextHop)
		if err != nil {
			return nil, fmt.Errorf("prefix %s: next hop %s: %w", p, nextHop, err)
		}
		attrs = append(attrs, mp)
	}
	return &apiutil.Path{Family: family, Nlri: nlri, Attrs: attrs, Withdrawal: withdraw}, nil
}

// RouterIDFromIPv6 is the BGP identifier of a node without an IPv4
// address: the last four bytes of its IPv6 address a, read as an IPv4
// address. The identifier must be a non-zero 32-bit number unique within
// the AS (RFC 6286), and the low bits are what tell the addresses of one
// node network apart. ok is false when a is not IPv6 or its last four bytes
// are zero.
func RouterIDFromIPv6(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() || a.Is4In6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	id := netip.AddrFrom4([4]byte(b[12:]))
	return id, !id.IsUnspecified()
}
