package cli

import (
	"testing"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// TestUplinkFacts: the chosen links make one fact, an annotation's choice
// marked; a mode without a link is a problem that turns the node's line
// into PROBLEM.
func TestUplinkFacts(t *testing.T) {
	b := newCheck("node", "node-3")
	uplinkFacts(b, []estuaryv1.NodeUplinkStatus{
		{Mode: "vlan", Link: "bond0", Source: "annotation", Candidates: []string{"bond0", "eth0"}},
		{Mode: "bgp", Source: "config", Candidates: []string{"ens5f0"}, Problem: "no bgp candidate link exists on node node-3: tried ens5f0"},
		{Mode: "vxlan", Link: "eth0", Source: "default"},
	})
	c := b.done()
	want := "bgp uplink: no bgp candidate link exists on node node-3: tried ens5f0; uplinks vlan bond0 (node annotation), vxlan eth0"
	if c.Level != LevelProblem || c.Message != want {
		t.Errorf("check %s %q, want %s %q", c.Level, c.Message, LevelProblem, want)
	}
}
