package family

import (
	"net/netip"
	"testing"
)

func TestLastAddr(t *testing.T) {
	for _, c := range []struct{ prefix, want string }{
		{"10.0.0.0/24", "10.0.0.255"},
		{"10.0.0.7/30", "10.0.0.7"},
		{"10.1.2.3/32", "10.1.2.3"},
		{"0.0.0.0/0", "255.255.255.255"},
		{"fd00::/64", "fd00::ffff:ffff:ffff:ffff"},
		{"fd00::1/127", "fd00::1"},
	} {
		if got := LastAddr(netip.MustParsePrefix(c.prefix)); got != netip.MustParseAddr(c.want) {
			t.Errorf("LastAddr(%s) = %s, want %s", c.prefix, got, c.want)
		}
	}
}

func TestOfAndIndex(t *testing.T) {
	if Of(netip.MustParseAddr("10.0.0.1")) != IPv4 || Of(netip.MustParseAddr("fd00::1")) != IPv6 {
		t.Error("Of names the wrong family")
	}
	if i, ok := IPv6.Index(); !ok || i != 1 || IPv4.Version() != 4 || Family("x").Valid() {
		t.Error("Index, Version or Valid is wrong")
	}
	if _, ok := Family("IPX").Index(); ok {
		t.Error("an unknown family has an index")
	}
}

func TestFromVersionInvertsVersion(t *testing.T) {
	for _, f := range []Family{IPv4, IPv6} {
		if got, ok := FromVersion(f.Version()); !ok || got != f {
			t.Errorf("FromVersion(%d) = %q, %v, want %q", f.Version(), got, ok, f)
		}
	}
	for _, v := range []int{0, 5, 46} {
		if got, ok := FromVersion(v); ok {
			t.Errorf("FromVersion(%d) = %q, want no family", v, got)
		}
	}
}
