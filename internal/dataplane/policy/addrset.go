package policy

import (
	"net/netip"
	"slices"

	"github.com/estuary-cni/estuary/pkg/family"
)

// Range is the addresses From to To, both included, of one family.
type Range struct {
	From, To netip.Addr
}

func (r Range) String() string {
	if r.From == r.To {
		return r.From.String()
	}
	return r.From.String() + "-" + r.To.String()
}

func prefixRange(p netip.Prefix) Range {
	p = p.Masked()
	return Range{From: p.Addr(), To: family.LastAddr(p)}
}

// ranges is the peer set of one family as sorted, disjoint, non-adjacent
// ranges: the union of each block's CIDR less its excepts.
func (ps Peers) ranges(fam family.Family) []Range {
	var out []Range
	for _, b := range ps.Blocks {
		if family.Of(b.CIDR.Addr()) != fam {
			continue
		}
		rs := []Range{prefixRange(b.CIDR)}
		for _, x := range b.Except {
			if family.Of(x.Addr()) == fam {
				rs = subtract(rs, prefixRange(x))
			}
		}
		out = append(out, rs...)
	}
	return merge(out)
}

// subtract removes x from each range of rs.
func subtract(rs []Range, x Range) []Range {
	var out []Range
	for _, r := range rs {
		if x.To.Less(r.From) || r.To.Less(x.From) {
			out = append(out, r)
			continue
		}
		if r.From.Less(x.From) {
			out = append(out, Range{From: r.From, To: x.From.Prev()})
		}
		if x.To.Less(r.To) {
			out = append(out, Range{From: x.To.Next(), To: r.To})
		}
	}
	return out
}

// merge sorts rs and joins ranges that overlap or touch.
func merge(rs []Range) []Range {
	if len(rs) == 0 {
		return nil
	}
	slices.SortFunc(rs, func(a, b Range) int { return a.From.Compare(b.From) })
	out := []Range{rs[0]}
	for _, r := range rs[1:] {
		last := &out[len(out)-1]
		if next := last.To.Next(); !next.IsValid() || r.From.Compare(next) <= 0 {
			if last.To.Less(r.To) {
				last.To = r.To
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// rangesContain says whether a sorted range list holds a.
func rangesContain(rs []Range, a netip.Addr) bool {
	i, _ := slices.BinarySearchFunc(rs, a, func(r Range, a netip.Addr) int {
		if r.To.Less(a) {
			return -1
		}
		if a.Less(r.From) {
			return 1
		}
		return 0
	})
	return i < len(rs) && !a.Less(rs[i].From) && !rs[i].To.Less(a)
}
