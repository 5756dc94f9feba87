package ipam

import (
	"net/netip"
	"slices"
	"testing"
)

func TestWindowDefaultsOnlyWhatIsUnset(t *testing.T) {
	for _, c := range []struct {
		prefix, start, end string
		want               [2]string
	}{
		{"10.0.0.0/24", "", "", [2]string{"10.0.0.1", "10.0.0.254"}},
		{"10.0.0.0/24", "10.0.0.10", "", [2]string{"10.0.0.10", "10.0.0.254"}},
		{"10.0.0.0/24", "", "10.0.0.20", [2]string{"10.0.0.1", "10.0.0.20"}},
		{"fd00::/120", "", "", [2]string{"fd00::1", "fd00::ff"}},
	} {
		var start, end netip.Addr
		if c.start != "" {
			start = ip(c.start)
		}
		if c.end != "" {
			end = ip(c.end)
		}
		s, e := Window(pfx(c.prefix), start, end)
		if s != ip(c.want[0]) || e != ip(c.want[1]) {
			t.Errorf("Window(%s, %q, %q) = %s-%s, want %s-%s", c.prefix, c.start, c.end, s, e, c.want[0], c.want[1])
		}
	}
}

func TestConflictsNamesEveryBrokenSharingRule(t *testing.T) {
	fp := func(network, prefix, start, end, gw string) Footprint {
		f := Footprint{Network: network, Prefix: pfx(prefix), Start: ip(start), End: ip(end)}
		if gw != "" {
			f.Gateway = ip(gw)
		}
		return f
	}
	a := fp("n", "10.0.0.0/24", "10.0.0.100", "10.0.0.200", "10.0.0.1")
	for _, c := range []struct {
		name string
		f    Footprint
		want []Conflict
	}{
		{"disjoint prefixes", fp("m", "10.0.1.0/24", "10.0.1.1", "10.0.1.254", ""), nil},
		{"other network", fp("m", "10.0.0.0/16", "10.0.0.1", "10.0.255.254", ""), []Conflict{ConflictNetwork}},
		{"other prefix", fp("n", "10.0.0.0/25", "10.0.0.1", "10.0.0.126", ""), []Conflict{ConflictPrefix}},
		{"disjoint windows, one gateway", fp("n", "10.0.0.0/24", "10.0.0.2", "10.0.0.99", "10.0.0.1"), nil},
		{"overlapping windows", fp("n", "10.0.0.0/24", "10.0.0.150", "10.0.0.250", "10.0.0.1"), []Conflict{ConflictWindow}},
		{"each holds the other's gateway", fp("n", "10.0.0.0/24", "10.0.0.1", "10.0.0.99", "10.0.0.150"),
			[]Conflict{ConflictHoldsGateway, ConflictGatewayInside}},
		{"window holds the gateway", fp("n", "10.0.0.0/24", "10.0.0.1", "10.0.0.99", ""), []Conflict{ConflictHoldsGateway}},
		{"gateway in the other's window", fp("n", "10.0.0.0/24", "10.0.0.2", "10.0.0.99", "10.0.0.150"), []Conflict{ConflictGatewayInside}},
	} {
		if got := c.f.Conflicts(a); !slices.Equal(got, c.want) {
			t.Errorf("%s: Conflicts = %v, want %v", c.name, got, c.want)
		}
	}
}
