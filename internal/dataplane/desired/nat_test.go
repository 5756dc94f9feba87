package desired

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/estuary-cni/estuary/pkg/family"
)

func TestRanges(t *testing.T) {
	r := func(from, to string) family.Range {
		return family.Range{First: netip.MustParseAddr(from), Last: netip.MustParseAddr(to)}
	}
	ps := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	for _, tc := range []struct {
		name string
		in   []netip.Prefix
		want []family.Range
	}{
		{"empty", nil, nil},
		{"one", ps("10.0.0.0/8"), []family.Range{r("10.0.0.0", "10.255.255.255")}},
		{"contained", ps("10.1.0.0/16", "10.0.0.0/8"), []family.Range{r("10.0.0.0", "10.255.255.255")}},
		{"adjacent", ps("10.0.0.0/24", "10.0.1.0/24"), []family.Range{r("10.0.0.0", "10.0.1.255")}},
		{"apart", ps("10.0.2.0/24", "10.0.0.0/24"), []family.Range{r("10.0.0.0", "10.0.0.255"), r("10.0.2.0", "10.0.2.255")}},
		{"unmasked and duplicate", ps("10.0.0.7/24", "10.0.0.0/24"), []family.Range{r("10.0.0.0", "10.0.0.255")}},
		{"everything", ps("0.0.0.0/0", "10.0.0.0/8"), []family.Range{r("0.0.0.0", "255.255.255.255")}},
		{"v6", ps("fd00::/64", "fd00:0:0:1::/64"), []family.Range{r("fd00::", "fd00::1:ffff:ffff:ffff:ffff")}},
	} {
		if got := Ranges(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Ranges = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNATFamilyCanonical(t *testing.T) {
	a := NATFamily{Sources: []netip.Prefix{netip.MustParsePrefix("10.0.0.9/8")}, Device: "estvx1",
		Exempt: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12"), netip.MustParsePrefix("10.0.0.0/8")}}
	b := NATFamily{Sources: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}, Device: "estvx1",
		Exempt: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("10.96.0.0/12"),
			netip.MustParsePrefix("10.0.0.0/8")}}
	if !a.Equal(b) {
		t.Errorf("%v != %v", a, b)
	}
	if (NATFamily{Device: "x", Exempt: b.Exempt}).Canonical().Device != "" {
		t.Error("an empty family must canonicalise to the zero value")
	}
}
