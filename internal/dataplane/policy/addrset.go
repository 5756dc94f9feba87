package policy

import (
	"net/netip"
	"slices"

	"github.com/estuary-cni/estuary/pkg/family"
)

// ranges is the peer set of one family as sorted, disjoint, non-adjacent
// ranges: the union of each block's CIDR less its excepts.
func (ps Peers) ranges(fam family.Family) []family.Range {
	var out []family.Range
	for _, b := range ps.Blocks {
		if family.Of(b.CIDR.Addr()) != fam {
			continue
		}
		rs := []family.Range{family.RangeOf(b.CIDR)}
		for _, x := range b.Except {
			if family.Of(x.Addr()) == fam {
				rs = subtract(rs, family.RangeOf(x))
			}
		}
		out = append(out, rs...)
	}
	return family.MergeRanges(out)
}

// subtract removes x from each range of rs.
func subtract(rs []family.Range, x family.Range) []family.Range {
	var out []family.Range
	for _, r := range rs {
		if x.Last.Less(r.First) || r.Last.Less(x.First) {
			out = append(out, r)
			continue
		}
		if r.First.Less(x.First) {
			out = append(out, family.Range{First: r.First, Last: x.First.Prev()})
		}
		if x.Last.Less(r.Last) {
			out = append(out, family.Range{First: x.Last.Next(), Last: r.Last})
		}
	}
	return out
}

// rangesContain says whether a sorted range list holds a.
func rangesContain(rs []family.Range, a netip.Addr) bool {
	i, _ := slices.BinarySearchFunc(rs, a, func(r family.Range, a netip.Addr) int {
		if r.Last.Less(a) {
			return -1
		}
		if a.Less(r.First) {
			return 1
		}
		return 0
	})
	return i < len(rs) && !a.Less(rs[i].First) && !rs[i].Last.Less(a)
}
