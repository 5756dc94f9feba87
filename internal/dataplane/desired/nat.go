package desired

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/estuary-cni/estuary/pkg/family"
)

// NATFamily is the source NAT of one address family: packets from Sources to
// a destination outside Exempt that do not leave through Device are
// masqueraded to the address of their outgoing interface, unless their
// firewall mark has every bit of SkipMark set (kube-proxy's masquerade mark:
// kube-proxy masquerades those itself). No Sources means no NAT for the
// family; SkipMark 0 means no exception.
type NATFamily struct {
	Sources  []netip.Prefix
	Exempt   []netip.Prefix
	Device   string
	SkipMark uint32
}

// NAT is the source NAT estuary wants per family.
type NAT struct {
	IPv4 NATFamily
	IPv6 NATFamily
}

// Empty reports whether the family masquerades nothing.
func (f NATFamily) Empty() bool { return len(f.Sources) == 0 }

// Canonical returns the family with masked, sorted, deduplicated prefixes;
// an empty family is the zero value.
func (f NATFamily) Canonical() NATFamily {
	if f.Empty() {
		return NATFamily{}
	}
	return NATFamily{Sources: canonPrefixes(f.Sources), Exempt: canonPrefixes(f.Exempt), Device: f.Device,
		SkipMark: f.SkipMark}
}

// Equal reports whether two families describe the same NAT.
func (f NATFamily) Equal(o NATFamily) bool {
	a, b := f.Canonical(), o.Canonical()
	return slices.Equal(a.Sources, b.Sources) && slices.Equal(a.Exempt, b.Exempt) && a.Device == b.Device &&
		a.SkipMark == b.SkipMark
}

// Family returns the NAT of family fam.
func (n NAT) Family(fam family.Family) NATFamily {
	if fam == family.IPv6 {
		return n.IPv6
	}
	return n.IPv4
}

func (f NATFamily) String() string {
	if f.Empty() {
		return "no nat"
	}
	s := fmt.Sprintf("masquerade from %v to not %v oif != %s", f.Sources, f.Exempt, f.Device)
	if f.SkipMark != 0 {
		s += fmt.Sprintf(" mark & %#x != %#x", f.SkipMark, f.SkipMark)
	}
	return s
}

func (n NAT) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ipv4: %s\nipv6: %s\n", n.IPv4, n.IPv6)
	return b.String()
}

func canonPrefixes(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if p.IsValid() {
			out = append(out, netip.PrefixFrom(p.Addr().Unmap(), p.Bits()).Masked())
		}
	}
	slices.SortFunc(out, comparePrefix)
	return slices.Compact(out)
}

// Ranges turns prefixes of one family into the fewest disjoint ranges that
// cover exactly the same addresses, in ascending order: overlapping and
// adjacent prefixes merge. Interval sets (nftables) hold ranges, not
// prefixes, and reject overlapping elements.
func Ranges(ps []netip.Prefix) []family.Range {
	var rs []family.Range
	for _, p := range canonPrefixes(ps) {
		rs = append(rs, family.RangeOf(p))
	}
	return family.MergeRanges(rs)
}
