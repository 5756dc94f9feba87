package policy

import (
	"fmt"
	"net/netip"
	"testing"
)

// benchNode: 100 local pods, 1,000 NetworkPolicies whose rules pick their
// peers among 10,000 pod addresses (1,000 each, every address in 100
// rules), each pod selected by 10 of them for ingress and egress.
func benchNode(shift int) Node {
	const policies, peers, local, perRule, perPod = 1000, 10000, 100, 1000, 10
	rules := make([]Rule, policies)
	for i := range rules {
		var ps Peers
		for j := range perRule {
			k := (i*perRule/10 + j + shift) % peers
			ps.Blocks = append(ps.Blocks, Block{CIDR: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(k >> 8), byte(k)}), 32)})
		}
		rules[i] = Rule{ID: fmt.Sprintf("np/ns/p%d/0", i), Peers: ps, Ports: []Port{{Protocol: TCP, From: 80}, {Protocol: TCP, From: 8000, To: 8100}}}
	}
	var n Node
	for e := range local {
		d := Direction{Isolated: true}
		for j := range perPod {
			d.Allow = append(d.Allow, rules[(e*perPod+j)%policies])
		}
		n.Endpoints = append(n.Endpoints, Endpoint{HostVeth: fmt.Sprintf("est%011x", e), Ingress: d, Egress: d})
	}
	return n
}

func BenchmarkCompile1000Policies10000Peers(b *testing.B) {
	n := benchNode(0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(n); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiffSteady: the table already holds the ruleset.
func BenchmarkDiffSteady(b *testing.B) {
	rs, _ := Compile(benchNode(0))
	have := readBack(rs)
	b.ReportAllocs()
	for b.Loop() {
		if o := Diff(rs, have); !o.Empty() {
			b.Fatal(o)
		}
	}
}

// BenchmarkCompileAndDiffPeerChange: every rule's peers move by one
// address (the worst case of a label change: every set differs).
func BenchmarkCompileAndDiffPeerChange(b *testing.B) {
	old, _ := Compile(benchNode(0))
	have := readBack(old)
	n := benchNode(1)
	b.ReportAllocs()
	for b.Loop() {
		rs, _ := Compile(n)
		if o := Diff(rs, have); len(o.RefillSets) == 0 {
			b.Fatal("no set changed")
		}
	}
}
