package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/estuary-cni/estuary/pkg/family"
)

// Range is an inclusive range of addresses of one family: family.Range, the
// one range type the allocator and the data plane share.
type Range = family.Range

// ParseRange parses "a" or "a-b" where a and b are IP addresses of the same family
// without zone and a <= b. This is the form the API stores reserved and excluded
// entries in. The error is an *Error of kind ErrInvalidConfig.
func ParseRange(s string) (Range, error) {
	first, last, isRange := strings.Cut(s, "-")
	a, err := parseRangeAddr(s, first)
	if err != nil {
		return Range{}, err
	}
	if !isRange {
		return Range{First: a, Last: a}, nil
	}
	b, err := parseRangeAddr(s, last)
	if err != nil {
		return Range{}, err
	}
	r := Range{First: a, Last: b}
	if err := checkRange(r); err != nil {
		return Range{}, &Error{Kind: ErrInvalidConfig, Detail: fmt.Sprintf("invalid range %q: %s", s, err)}
	}
	return r, nil
}

func parseRangeAddr(whole, part string) (netip.Addr, error) {
	a, err := netip.ParseAddr(part)
	if err != nil {
		return netip.Addr{}, &Error{Kind: ErrInvalidConfig, Detail: fmt.Sprintf("invalid range %q", whole), Err: err}
	}
	if a.Zone() != "" {
		return netip.Addr{}, &Error{Kind: ErrInvalidConfig, Detail: fmt.Sprintf("invalid range %q: address %s has a zone", whole, part)}
	}
	return a, nil
}

// checkRange reports why r is not a valid range, or nil.
func checkRange(r Range) error {
	switch {
	case !r.First.IsValid() || !r.Last.IsValid():
		return fmt.Errorf("missing address")
	case r.First.Zone() != "" || r.Last.Zone() != "":
		return fmt.Errorf("address with zone")
	case r.First.Is4() != r.Last.Is4():
		return fmt.Errorf("%s and %s are of different families", r.First, r.Last)
	case r.Last.Less(r.First):
		return fmt.Errorf("first address %s is after last address %s", r.First, r.Last)
	}
	return nil
}

// span is an inclusive range of offsets from a prefix's base address.
type span struct{ lo, hi uint64 }

// spans is a list of spans kept sorted, disjoint and non-adjacent, so a set of
// 2^40 consecutive offsets costs one element and membership is a binary search.
type spans []span

// normalize sorts in and merges overlapping or adjacent spans.
func normalize(in []span) spans {
	if len(in) == 0 {
		return nil
	}
	s := slices.Clone(in)
	slices.SortFunc(s, func(a, b span) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	out := s[:1]
	for _, x := range s[1:] {
		top := &out[len(out)-1]
		if top.hi == ^uint64(0) || x.lo <= top.hi+1 {
			top.hi = max(top.hi, x.hi)
			continue
		}
		out = append(out, x)
	}
	return out
}

// find returns the index of the first span whose hi is >= x (len(s) if none).
func (s spans) find(x uint64) int {
	lo, hi := 0, len(s)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s[m].hi < x {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// contains reports whether x lies in one of the spans.
func (s spans) contains(x uint64) bool {
	i := s.find(x)
	return i < len(s) && s[i].lo <= x
}

// clip returns the part of s inside [lo, hi].
func (s spans) clip(lo, hi uint64) spans {
	var out spans
	for _, x := range s {
		if x.hi < lo || x.lo > hi {
			continue
		}
		out = append(out, span{max(x.lo, lo), min(x.hi, hi)})
	}
	return out
}

// subtract returns the offsets of s that are not in t.
func (s spans) subtract(t spans) spans {
	var out spans
	for _, x := range s {
		lo := x.lo
		done := false
		for i := t.find(lo); i < len(t) && t[i].lo <= x.hi; i++ {
			if t[i].lo > lo {
				out = append(out, span{lo, t[i].lo - 1})
			}
			if t[i].hi >= x.hi {
				done = true
				break
			}
			lo = t[i].hi + 1
		}
		if !done {
			out = append(out, span{lo, x.hi})
		}
	}
	return out
}

// union returns the offsets in a or b.
func union(a, b spans) spans {
	return normalize(append(slices.Clone(a), b...))
}

// count returns the number of offsets in s, modulo 2^64: a full 64-bit space
// counts as 0. Callers subtract it from a size computed the same way, which gives
// the exact result whenever that result fits in a uint64.
func (s spans) count() uint64 {
	var n uint64
	for _, x := range s {
		n += x.hi - x.lo + 1
	}
	return n
}
