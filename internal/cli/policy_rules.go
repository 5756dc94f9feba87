package cli

// The rules of one pod as the daemon computes them, read from the model
// policytranslate makes and the ruleset policy.Compile makes of it.

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/pkg/family"
)

// placeholderVeth stands for the pod's host veth when the daemon could
// not name it: the chains are the daemon's but for their names.
const placeholderVeth = "unknown-veth"

// podEndpoint is an interface of the pod: its host veth and addresses.
type podEndpoint struct {
	HostVeth string
	Addrs    []netip.Addr
}

// modelRule is one rule of the model for the pod.
type modelRule struct {
	ID        string `json:"id"`
	Direction string `json:"direction"`
	// Tier is "admin", "networkpolicy" or "baseline"; Action the admin
	// and baseline rules' Allow, Deny or Pass (a NetworkPolicy rule
	// allows).
	Tier   string   `json:"tier"`
	Action string   `json:"action"`
	Peers  []string `json:"peers"`
	Ports  []string `json:"ports,omitempty"`
}

// endpointChains is what the node's table holds for one interface of the
// pod: its chains in nft's syntax and the peer sets they use.
type endpointChains struct {
	HostVeth string   `json:"hostVeth"`
	Addrs    []string `json:"addresses"`
	// Isolated says, per direction, whether a NetworkPolicy isolates it.
	IngressIsolated bool       `json:"ingressIsolated"`
	EgressIsolated  bool       `json:"egressIsolated"`
	Chains          []nftChain `json:"chains"`
	Sets            []nftSet   `json:"sets"`
}

type nftChain struct {
	Name  string   `json:"name"`
	Rules []string `json:"rules"`
}

type nftSet struct {
	Name string `json:"name"`
	// Rule is the rule ID whose peers the set holds.
	Rule     string   `json:"rule"`
	Elements []string `json:"elements"`
}

// modelRules lists the rules of e, each direction in evaluation order.
func modelRules(e policy.Endpoint) []modelRule {
	var out []modelRule
	for _, d := range []struct {
		name string
		dir  policy.Direction
	}{{"ingress", e.Ingress}, {"egress", e.Egress}} {
		for _, r := range d.dir.Admin {
			out = append(out, viewRule(r.Rule, d.name, "admin", r.Action.String()))
		}
		for _, r := range d.dir.Allow {
			out = append(out, viewRule(r, d.name, "networkpolicy", policy.Allow.String()))
		}
		for _, r := range d.dir.Baseline {
			out = append(out, viewRule(r.Rule, d.name, "baseline", r.Action.String()))
		}
	}
	return out
}

func viewRule(r policy.Rule, dir, tier, action string) modelRule {
	m := modelRule{ID: r.ID, Direction: dir, Tier: tier, Action: action, Peers: []string{}}
	if r.Peers.Any {
		m.Peers = append(m.Peers, "any")
	}
	for _, b := range r.Peers.Blocks {
		s := b.CIDR.String()
		for _, x := range b.Except {
			s += " except " + x.String()
		}
		m.Peers = append(m.Peers, s)
	}
	for _, p := range r.Ports {
		m.Ports = append(m.Ports, portText(p))
	}
	return m
}

func portText(p policy.Port) string {
	switch {
	case p.From == 0:
		return p.Protocol.String()
	case p.To == 0 || p.To == p.From:
		return p.Protocol.String() + "/" + strconv.Itoa(int(p.From))
	}
	return fmt.Sprintf("%s/%d-%d", p.Protocol, p.From, p.To)
}

// chainsOf picks e's chains and the sets they use out of rs.
func chainsOf(e policy.Endpoint, rs policy.Ruleset) endpointChains {
	out := endpointChains{HostVeth: e.HostVeth, Addrs: []string{}, Chains: []nftChain{}, Sets: []nftSet{},
		IngressIsolated: e.Ingress.Isolated, EgressIsolated: e.Egress.Isolated}
	for _, a := range e.Addrs {
		out.Addrs = append(out.Addrs, a.String())
	}
	ids := map[string]string{} // set name -> rule ID
	for _, r := range modelRules(e) {
		for _, fam := range []family.Family{family.IPv4, family.IPv6} {
			ids[policy.SetName(r.ID, fam)] = r.ID
		}
	}
	used := map[string]bool{}
	in, eg := policy.IngressChain(e.HostVeth), policy.EgressChain(e.HostVeth)
	for _, c := range rs.Chains {
		if c.Name != in && c.Name != eg && !strings.HasPrefix(c.Name, in+"-") && !strings.HasPrefix(c.Name, eg+"-") {
			continue
		}
		nc := nftChain{Name: c.Name, Rules: []string{}}
		for _, r := range c.Rules {
			nc.Rules = append(nc.Rules, r.String())
			if r.Set != "" {
				used[r.Set] = true
			}
		}
		out.Chains = append(out.Chains, nc)
	}
	for _, s := range rs.Sets {
		if !used[s.Name] {
			continue
		}
		ns := nftSet{Name: s.Name, Rule: ids[s.Name], Elements: []string{}}
		for _, r := range s.Ranges {
			ns.Elements = append(ns.Elements, r.String())
		}
		out.Sets = append(out.Sets, ns)
	}
	slices.SortFunc(out.Chains, func(a, b nftChain) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// rulesOf are the rules of rules whose ID names the policy ref
// ("np/<ns>/<name>", "cnp/<name>").
func rulesOf(ref string, rules []modelRule) []modelRule {
	out := []modelRule{}
	for _, r := range rules {
		kind, name := policy.ObjectOf(r.ID)
		if kind+"/"+name == ref {
			out = append(out, r)
		}
	}
	return out
}
