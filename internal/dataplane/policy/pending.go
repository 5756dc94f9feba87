package policy

// Pending endpoints. A pod's interface exists before its policy is known:
// the CNI server builds it, and the node computes the pod's chains from the
// cluster's objects, which may not hold the pod yet (the cache lags the API
// server) or may take longer to compute than the pod takes to start. While
// its policy is being computed, an endpoint is pending: both verdict maps
// send its veth to the chain PendingChain, which drops every packet, so a
// pod some policy may select is isolated from its first packet instead of
// open until a pass writes its chain. The base chains still accept
// established and related packets before the maps, and the node's own
// traffic to a pod (the kubelet's probes) never meets them, so a pending
// pod's probes pass.
//
// Pending is an ordinary chain of the ruleset, not part of the skeleton: a
// pass that computes the pod replaces its entries by its chains (or
// removes them, for a pod no policy selects) in the batch that deletes the
// chain once nothing jumps to it, and a table holding it is never taken for
// one to recreate.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// PendingChain is the chain of pending endpoints: it drops every packet.
const PendingChain = "pending"

// pendingChain is PendingChain's content.
func pendingChain() Chain { return Chain{Name: PendingChain, Rules: []NFRule{{Verdict: Drop}}} }

// Hold makes veths pending in rs: both maps send each to PendingChain,
// replacing any entry it had, and rs holds that chain.
func (rs *Ruleset) Hold(veths ...string) error {
	for _, v := range veths {
		if !vethName.MatchString(v) {
			return fmt.Errorf("pending endpoint: host veth %q is not a link name", v)
		}
	}
	if len(veths) == 0 {
		return nil
	}
	if rs.Ingress == nil {
		rs.Ingress = map[string]string{}
	}
	if rs.Egress == nil {
		rs.Egress = map[string]string{}
	}
	for _, v := range veths {
		rs.Ingress[v], rs.Egress[v] = PendingChain, PendingChain
	}
	i, found := slices.BinarySearchFunc(rs.Chains, PendingChain, func(c Chain, name string) int {
		return strings.Compare(c.Name, name)
	})
	if !found {
		rs.Chains = slices.Insert(rs.Chains, i, pendingChain())
	}
	return nil
}

// ErrNotSkeleton is HoldOps' answer for a table whose skeleton is not
// estuary's: holding an endpoint there would not isolate it, and
// recreating the table would drop every other pod's chains.
var ErrNotSkeleton = errors.New("the policy table's base chains or verdict maps are not estuary's")

// HoldOps are the operations that make the veths of have pending without
// touching anything else: an entry is added to each map that has none for
// the veth (an entry a pass wrote, a chain or PendingChain, is the
// endpoint's decision already and is kept), and PendingChain is added or
// repaired when an entry needs it. A missing table is created with the
// skeleton of shape.
func HoldOps(have Table, shape Skeleton, veths []string) (Ops, error) {
	var o Ops
	if !have.Present {
		rs := Ruleset{Skeleton: shape}
		if err := rs.Hold(veths...); err != nil {
			return Ops{}, err
		}
		return Diff(rs, have), nil
	}
	if !have.Skeleton {
		return Ops{}, ErrNotSkeleton
	}
	for _, v := range veths {
		if !vethName.MatchString(v) {
			return Ops{}, fmt.Errorf("pending endpoint: host veth %q is not a link name", v)
		}
		for _, m := range []struct {
			name    string
			entries map[string]string
		}{{IngressMap, have.Ingress}, {EgressMap, have.Egress}} {
			if _, ok := m.entries[v]; !ok {
				o.AddMap = append(o.AddMap, MapEntry{Map: m.name, Veth: v, Chain: PendingChain})
			}
		}
	}
	if len(o.AddMap) == 0 {
		return o, nil
	}
	want := pendingChain()
	switch tags, ok := have.Chains[PendingChain]; {
	case !ok:
		o.AddChains = []Chain{want}
	case !sameRules(tags, want.Rules):
		o.RefillChains = []Chain{want}
	}
	return o, nil
}
