package policy

import (
	"errors"
	"net/netip"
	"reflect"
	"slices"
	"testing"
)

// TestHoldDropsBothDirectionsOfPendingVeths: a held veth's entries in both
// maps lead to PendingChain, which drops every packet, replacing the
// chains the ruleset had for it; other veths keep theirs.
func TestHoldDropsBothDirectionsOfPendingVeths(t *testing.T) {
	rs := Ruleset{Chains: []Chain{{Name: "i-a", Rules: []NFRule{{Verdict: Drop}}}, {Name: "z", Rules: nil}},
		Ingress: map[string]string{"a": "i-a", "b": "i-a"}}
	if err := rs.Hold("b", "c"); err != nil {
		t.Fatal(err)
	}
	if err := rs.Hold("c"); err != nil { // twice: one chain
		t.Fatal(err)
	}
	names := []string{}
	for _, c := range rs.Chains {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"i-a", PendingChain, "z"}) {
		t.Fatalf("chains %v, want sorted with one %s", names, PendingChain)
	}
	p := Packet{Peer: netip.MustParseAddr("10.0.0.1"), Protocol: uint8(TCP), Port: 80}
	for _, veth := range []string{"b", "c"} {
		for _, m := range []string{IngressMap, EgressMap} {
			if admits(t, rs, m, veth, p) {
				t.Errorf("pending %s admits a packet through map %s", veth, m)
			}
		}
	}
	if rs.Ingress["a"] != "i-a" {
		t.Errorf("a's entry changed: %v", rs.Ingress)
	}
	if err := rs.Hold("bad name!"); err == nil {
		t.Error("a veth that is not a link name was held")
	}
}

// TestHoldOpsAddsOnlyMissingEntries: holding a veth adds an entry to each
// map lacking one, keeps an entry a pass wrote, adds PendingChain only
// when missing, repairs one whose rules differ, and does nothing for a
// veth already decided in both maps.
func TestHoldOpsAddsOnlyMissingEntries(t *testing.T) {
	base := Table{Present: true, Skeleton: true, Chains: map[string][]string{"e-v": {"drop"}},
		Ingress: map[string]string{}, Egress: map[string]string{"v": "e-v"}}
	o, err := HoldOps(base, Skeleton{}, []string{"v"})
	if err != nil {
		t.Fatal(err)
	}
	want := Ops{AddChains: []Chain{pendingChain()}, AddMap: []MapEntry{{IngressMap, "v", PendingChain}}}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("ops:\n%s\nwant:\n%s", o, want)
	}

	base.Chains[PendingChain] = []string{"return"}
	o, _ = HoldOps(base, Skeleton{}, []string{"v"})
	if len(o.RefillChains) != 1 || len(o.AddChains) != 0 {
		t.Errorf("a pending chain that does not drop is not repaired:\n%s", o)
	}

	base.Ingress["v"] = "i-v"
	if o, _ := HoldOps(base, Skeleton{}, []string{"v"}); !o.Empty() {
		t.Errorf("a veth decided in both maps is touched:\n%s", o)
	}
}

// TestHoldOpsOfMissingOrForeignTable: without a table the hold creates it
// with the skeleton of the shape asked for and the entries; a table whose
// skeleton is not estuary's is refused (recreating it would drop the other
// pods' chains), with nothing to apply.
func TestHoldOpsOfMissingOrForeignTable(t *testing.T) {
	o, err := HoldOps(Table{}, Skeleton{PodToNode: PodToNodePolicy}, []string{"v"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Create || o.Skeleton.PodToNode != PodToNodePolicy || len(o.AddMap) != 2 || len(o.AddChains) != 1 {
		t.Fatalf("missing table:\n%s", o)
	}
	o, err = HoldOps(Table{Present: true}, Skeleton{}, []string{"v"})
	if !errors.Is(err, ErrNotSkeleton) || !o.Empty() {
		t.Fatalf("foreign skeleton: ops %s, err %v", o, err)
	}
}

// TestDiffReplacesPendingByThePodsChains: a pass that computes a pending
// pod replaces its entries by its chains and deletes PendingChain, which
// nothing uses any more, after the entries, in the same Ops; a pod no
// policy selects loses its entries.
func TestDiffReplacesPendingByThePodsChains(t *testing.T) {
	have := Table{Present: true, Skeleton: true,
		Chains:  map[string][]string{PendingChain: {"drop"}},
		Ingress: map[string]string{"v": PendingChain, "w": PendingChain},
		Egress:  map[string]string{"v": PendingChain, "w": PendingChain}}
	want := Ruleset{Chains: []Chain{{Name: "i-v", Rules: []NFRule{{Verdict: Drop}}}},
		Ingress: map[string]string{"v": "i-v"}, Egress: map[string]string{}}
	o := Diff(want, have)
	wantOps := Ops{
		AddChains: []Chain{{Name: "i-v", Rules: []NFRule{{Verdict: Drop}}}},
		DelMap: []MapEntry{{IngressMap, "v", PendingChain}, {IngressMap, "w", PendingChain},
			{EgressMap, "v", PendingChain}, {EgressMap, "w", PendingChain}},
		AddMap:    []MapEntry{{IngressMap, "v", "i-v"}},
		DelChains: []string{PendingChain},
	}
	if !reflect.DeepEqual(o, wantOps) {
		t.Fatalf("ops:\n%s\nwant:\n%s", o, wantOps)
	}
}
