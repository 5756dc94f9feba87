package family

import (
	"net/netip"
	"slices"
)

// Range is an inclusive range of addresses of one family: the allocator's
// reserved and excluded entries (pkg/ipam), the policy table's address sets
// and the source NAT's interval sets (internal/dataplane) all use it. A
// single address is a range whose First and Last are equal.
type Range struct {
	First netip.Addr
	Last  netip.Addr
}

// RangeOf is the addresses of p, its network address through its last.
func RangeOf(p netip.Prefix) Range {
	p = p.Masked()
	return Range{First: p.Addr(), Last: LastAddr(p)}
}

// String renders r as "a" for a single address, else "a-b".
func (r Range) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + "-" + r.Last.String()
}

// Contains reports whether a lies within r.
func (r Range) Contains(a netip.Addr) bool {
	return a.IsValid() && a.Is4() == r.First.Is4() && !a.Less(r.First) && !r.Last.Less(a)
}

// MergeRanges sorts rs in place and joins the ranges that overlap or touch,
// giving the fewest disjoint ranges that cover the same addresses.
func MergeRanges(rs []Range) []Range {
	if len(rs) == 0 {
		return nil
	}
	slices.SortFunc(rs, func(a, b Range) int { return a.First.Compare(b.First) })
	out := []Range{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if next := last.Last.Next(); !next.IsValid() || r.First.Compare(next) <= 0 {
			if last.Last.Less(r.Last) {
				last.Last = r.Last
			}
			continue
		}
		out = append(out, r)
	}
	return out
}
