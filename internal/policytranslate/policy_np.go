package policytranslate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

// netpol is a NetworkPolicy, its rules translated the first time it
// selects a local pod.
type netpol struct {
	src             *networkingv1.NetworkPolicy
	ref             objRef
	sel             labels.Selector
	ingress, egress bool
	done            bool
	in              []ruleTmpl
	out             []policy.Rule
}

// networkPolicies reads the policies' selectors and types, by namespace
// and name. A policy whose podSelector cannot be read is skipped.
func (ix *index) networkPolicies(list []networkingv1.NetworkPolicy) map[string][]*netpol {
	out := map[string][]*netpol{}
	for i := range list {
		np := &list[i]
		ref := objRef{KindNetworkPolicy, np.Namespace, np.Name}
		sel, err := selector(&np.Spec.PodSelector)
		if err != nil {
			ix.report(ref, problems{{Field: "spec.podSelector", Message: err.Error() + " (policy skipped: nobody knows whom it selects)"}})
			continue
		}
		p := &netpol{src: np, ref: ref, sel: sel}
		if len(np.Spec.PolicyTypes) == 0 {
			p.ingress, p.egress = true, len(np.Spec.Egress) > 0
		}
		for _, t := range np.Spec.PolicyTypes {
			switch t {
			case networkingv1.PolicyTypeIngress:
				p.ingress = true
			case networkingv1.PolicyTypeEgress:
				p.egress = true
			}
		}
		out[np.Namespace] = append(out[np.Namespace], p)
	}
	for _, ps := range out {
		slices.SortFunc(ps, func(a, b *netpol) int { return strings.Compare(a.src.Name, b.src.Name) })
	}
	return out
}

// apply isolates ep for np's types and adds its rules when np selects pod.
func (np *netpol) apply(ix *index, pod *podInfo, ep *policy.Endpoint) {
	if !np.sel.Matches(pod.labels) {
		return
	}
	np.translate(ix)
	if np.ingress {
		ep.Ingress.Isolated = true
		for _, t := range np.in {
			if r, ok := t.forLocal(pod); ok {
				ep.Ingress.Allow = append(ep.Ingress.Allow, r)
			}
		}
	}
	if np.egress {
		ep.Egress.Isolated = true
		ep.Egress.Allow = append(ep.Egress.Allow, np.out...)
	}
}

// translate translates np's rules once, reporting its problems: a rule
// that cannot be read whole, or that the compiler would reject, is
// dropped while the policy still isolates what it selects.
func (np *netpol) translate(ix *index) {
	if np.done {
		return
	}
	np.done = true
	var types problems
	for i, t := range np.src.Spec.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			types.add(fmt.Sprintf("spec.policyTypes[%d]", i), fmt.Sprintf("unknown type %q (ignored)", t))
		}
	}
	ix.report(np.ref, types)
	ns, name := np.src.Namespace, np.src.Name
	for i, r := range np.src.Spec.Ingress {
		id := fmt.Sprintf("np/%s/%s/ingress/%d", ns, name, i)
		field := fmt.Sprintf("spec.ingress[%d]", i)
		p, ps, probs := ix.npRule(ns, field, "from", r.From, r.Ports)
		if len(probs) == 0 && !p.none() {
			t := ruleTmpl{id: id, peers: p.model(), ports: ps}
			if err := (policy.Rule{ID: id, Peers: t.peers, Ports: ps.numbered}).Validate(); err != nil {
				probs.add(field, err.Error())
			} else {
				np.in = append(np.in, t)
			}
		}
		ix.report(np.ref, probs.then("rule dropped"))
	}
	for i, r := range np.src.Spec.Egress {
		id := fmt.Sprintf("np/%s/%s/egress/%d", ns, name, i)
		field := fmt.Sprintf("spec.egress[%d]", i)
		p, ps, probs := ix.npRule(ns, field, "to", r.To, r.Ports)
		if len(probs) == 0 && !p.none() {
			rules := ix.egressRules(id, p, ps)
			if err := validateRules(rules); err != nil {
				probs.add(field, err.Error())
			} else {
				np.out = append(np.out, rules...)
			}
		}
		ix.report(np.ref, probs.then("rule dropped"))
	}
}

// validateRules runs the compiler's validation on each rule.
func validateRules(rules []policy.Rule) error {
	for _, r := range rules {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// npRule reads a rule's ports and peers (none: every peer), field being
// the rule's and peerKey "from" or "to"; problems when any part cannot be
// read.
func (ix *index) npRule(ns, field, peerKey string, list []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) (peers, portSpec, problems) {
	ps, probs := npPorts(field, ports)
	if len(list) == 0 {
		return peers{any: true}, ps, probs
	}
	var p peers
	for i, peer := range list {
		probs = append(probs, ix.npPeer(ns, fmt.Sprintf("%s.%s[%d]", field, peerKey, i), peer, &p)...)
	}
	return p, ps, probs
}

func (ix *index) npPeer(ns, field string, peer networkingv1.NetworkPolicyPeer, p *peers) problems {
	var probs problems
	if peer.IPBlock != nil {
		if peer.PodSelector != nil || peer.NamespaceSelector != nil {
			probs.add(field, "ipBlock with a selector")
			return probs
		}
		b, probs := ipBlock(field+".ipBlock", peer.IPBlock)
		if len(probs) == 0 {
			p.blocks = append(p.blocks, b)
		}
		return probs
	}
	podSel := labels.Everything()
	if peer.PodSelector != nil {
		sel, err := selector(peer.PodSelector)
		if err != nil {
			probs.add(field+".podSelector", err.Error())
		}
		podSel = sel
	}
	switch {
	case peer.NamespaceSelector != nil:
		nsSel, err := selector(peer.NamespaceSelector)
		if err != nil {
			probs.add(field+".namespaceSelector", err.Error())
		}
		if len(probs) == 0 {
			p.pods = append(p.pods, ix.inNamespaces(nsSel, podSel)...)
		}
	case peer.PodSelector != nil:
		if len(probs) == 0 {
			p.pods = append(p.pods, ix.inNamespace(ns, podSel)...)
		}
	default:
		probs.add(field, "no podSelector, namespaceSelector or ipBlock")
	}
	return probs
}

// ipBlock reads an ipBlock, its prefixes unmapped (see unmap).
func ipBlock(field string, b *networkingv1.IPBlock) (policy.Block, problems) {
	var probs problems
	cidr, err := unmap(b.CIDR)
	if err != nil {
		probs.add(field+".cidr", err.Error())
	}
	out := policy.Block{CIDR: cidr}
	for i, x := range b.Except {
		px, err := unmap(x)
		if err != nil {
			probs.add(fmt.Sprintf("%s.except[%d]", field, i), err.Error())
			continue
		}
		out.Except = append(out.Except, px)
	}
	return out, probs
}

// npPorts reads a rule's ports: none means every port of every protocol.
func npPorts(field string, ports []networkingv1.NetworkPolicyPort) (portSpec, problems) {
	if len(ports) == 0 {
		return portSpec{all: true}, nil
	}
	var (
		ps    portSpec
		probs problems
	)
	for i, pt := range ports {
		at := fmt.Sprintf("%s.ports[%d]", field, i)
		var proto corev1.Protocol
		if pt.Protocol != nil {
			proto = *pt.Protocol
		}
		pr, err := protocol(proto)
		if err != nil {
			probs.add(at+".protocol", err.Error())
			continue
		}
		switch {
		case pt.Port == nil:
			if pt.EndPort != nil {
				probs.add(at+".endPort", "endPort without port")
				continue
			}
			ps.numbered = append(ps.numbered, policy.Port{Protocol: pr})
		case pt.Port.Type == intstr.String:
			if pt.EndPort != nil {
				probs.add(at+".endPort", fmt.Sprintf("endPort with the named port %q", pt.Port.StrVal))
				continue
			}
			ps.named = append(ps.named, portName{name: pt.Port.StrVal, proto: pr})
		default:
			port, err := portRange(pt.Port.IntVal, pt.EndPort)
			if err != nil {
				probs.add(at, err.Error())
				continue
			}
			port.Protocol = pr
			ps.numbered = append(ps.numbered, port)
		}
	}
	return ps, probs
}

// portRange is from, or from to end when end is set.
func portRange(from int32, end *int32) (policy.Port, error) {
	if from < 1 || from > 65535 {
		return policy.Port{}, fmt.Errorf("port %d is not in 1-65535", from)
	}
	p := policy.Port{From: uint16(from)}
	if end != nil && *end != from {
		if *end < from || *end > 65535 {
			return policy.Port{}, fmt.Errorf("port range %d-%d", from, *end)
		}
		p.To = uint16(*end)
	}
	return p, nil
}
