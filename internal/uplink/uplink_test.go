package uplink

import (
	"slices"
	"strings"
	"testing"
)

// TestParseListRefusesBadNames: a list parses in order; an empty entry, a
// name over 15 bytes, a slash or a space is refused with an error naming
// the value.
func TestParseListRefusesBadNames(t *testing.T) {
	got, err := ParseList("bond0,eth0,ens5f0")
	if err != nil || !slices.Equal(got, []string{"bond0", "eth0", "ens5f0"}) {
		t.Fatalf("ParseList = %v, %v; want [bond0 eth0 ens5f0]", got, err)
	}
	for _, tc := range []struct{ value, says string }{
		{"", "entry 1: empty link name"}, {"eth0,,bond0", "entry 2: empty link name"}, {"eth0,", "entry 2: empty link name"},
		{"abcdefghijklmnop", `"abcdefghijklmnop" is 16 bytes`}, {"eth0/1", `"eth0/1" holds a slash`},
		{"eth0,eth 0", `entry 2: link name "eth 0" holds a slash, colon or space`}, {"eth0:1", `"eth0:1"`}, {"..", `".." is not allowed`},
	} {
		_, err := ParseList(tc.value)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("ParseList(%q) = %v, want an error saying %q", tc.value, err, tc.says)
		}
	}
}

// TestResolvePrecedence: the node's annotation overrides the configured
// list; without either the mode's default applies; a malformed annotation
// is refused, naming the annotation, the node and the value, and the
// configured list applies.
func TestResolvePrecedence(t *testing.T) {
	conf := []string{"bond0", "eth0"}
	c := Resolve(VLAN, "node-1", nil, conf)
	if c.Source != FromConfig || !slices.Equal(c.Names, conf) || c.Refused != "" {
		t.Errorf("no annotation: %+v, want the configured list", c)
	}
	c = Resolve(VLAN, "node-1", map[string]string{Annotation(VLAN): "ens5,eth0", Annotation(BGP): "x"}, conf)
	if c.Source != FromAnnotation || !slices.Equal(c.Names, []string{"ens5", "eth0"}) {
		t.Errorf("annotation: %+v, want [ens5 eth0] from the annotation", c)
	}
	if c = Resolve(BGP, "node-1", nil, nil); c.Source != FromDefault || len(c.Names) != 0 {
		t.Errorf("nothing configured: %+v, want the default", c)
	}
	c = Resolve(VXLAN, "node-1", map[string]string{Annotation(VXLAN): "eth0, bond0"}, conf)
	if c.Source != FromConfig || !slices.Equal(c.Names, conf) {
		t.Errorf("malformed annotation: %+v, want the configured list kept", c)
	}
	for _, want := range []string{"networking.estuary.io/uplink-vxlan", "node-1", `" bond0"`} {
		if !strings.Contains(c.Refused, want) {
			t.Errorf("refusal %q does not name %s", c.Refused, want)
		}
	}
}

// TestChooseTakesTheFirstExisting: the first candidate that exists wins,
// whatever its place; none existing chooses nothing.
func TestChooseTakesTheFirstExisting(t *testing.T) {
	links := map[string]bool{"eth0": true, "ens5": true}
	exists := func(n string) bool { return links[n] }
	for _, tc := range []struct {
		names []string
		want  string
		ok    bool
	}{
		{[]string{"bond0", "ens5", "eth0"}, "ens5", true},
		{[]string{"eth0", "ens5"}, "eth0", true},
		{[]string{"bond0", "ens5f0"}, "", false},
		{nil, "", false},
	} {
		if got, ok := Choose(tc.names, exists); got != tc.want || ok != tc.ok {
			t.Errorf("Choose(%v) = %q, %v; want %q, %v", tc.names, got, ok, tc.want, tc.ok)
		}
	}
}
