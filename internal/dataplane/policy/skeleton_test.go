package policy

import (
	"net/netip"
	"strings"
	"testing"
)

// TestParsePodToNode: each name reads back as the value that prints it;
// anything else is refused with the value named.
func TestParsePodToNode(t *testing.T) {
	for _, name := range PodToNodeValues {
		v, err := ParsePodToNode(name)
		if err != nil || v.String() != name {
			t.Errorf("ParsePodToNode(%q) = %v, %v", name, v, err)
		}
	}
	if v, _ := ParsePodToNode("allow"); v != PodToNodeAllow {
		t.Errorf("allow parses as %v", v)
	}
	if _, err := ParsePodToNode("deny"); err == nil || !strings.Contains(err.Error(), `"deny"`) {
		t.Errorf("ParsePodToNode(deny): %v, want an error naming it", err)
	}
}

// TestDiffSkeletonShape: a table of another shape is recreated whole, in
// the wanted shape and with every set, chain and map entry, in one Ops; a
// table of the wanted shape is left alone.
func TestDiffSkeletonShape(t *testing.T) {
	rs, err := Compile(Node{Endpoints: []Endpoint{{HostVeth: "est0", Egress: Direction{Isolated: true,
		Allow: []Rule{{ID: "np/a/0", Peers: Peers{Blocks: []Block{{CIDR: netip.MustParsePrefix("10.0.0.0/24")}}}}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range Skeletons() {
		for _, to := range Skeletons() {
			have := readBack(rs)
			have.Shape = from
			want := rs
			want.Skeleton = to
			o := Diff(want, have)
			if from == to {
				if !o.Empty() {
					t.Errorf("%s to %s: want nothing, got\n%s", from.PodToNode, to.PodToNode, o)
				}
				continue
			}
			if !o.Delete || !o.Create || o.Skeleton != to || len(o.AddSets) != len(rs.Sets) ||
				len(o.AddChains) != len(rs.Chains) || len(o.AddMap) != len(rs.Egress) {
				t.Errorf("%s to %s: want the table recreated whole, got\n%s", from.PodToNode, to.PodToNode, o)
			}
		}
	}
}
