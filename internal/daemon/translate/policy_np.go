package translate

import (
	"fmt"
	"net/netip"
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
	sel             labels.Selector
	ingress, egress bool
	done            bool
	in              []ruleTmpl
	out             []policy.Rule
}

// networkPolicies reads the policies' selectors and types, by namespace
// and name.
func (ix *index) networkPolicies(list []networkingv1.NetworkPolicy) map[string][]*netpol {
	out := map[string][]*netpol{}
	for i := range list {
		np := &list[i]
		sel, err := selector(&np.Spec.PodSelector)
		if err != nil {
			ix.errorf("networkpolicy %s/%s: spec.podSelector: %w", np.Namespace, np.Name, err)
			continue
		}
		p := &netpol{src: np, sel: sel}
		if len(np.Spec.PolicyTypes) == 0 {
			p.ingress, p.egress = true, len(np.Spec.Egress) > 0
		}
		for _, t := range np.Spec.PolicyTypes {
			switch t {
			case networkingv1.PolicyTypeIngress:
				p.ingress = true
			case networkingv1.PolicyTypeEgress:
				p.egress = true
			default:
				ix.errorf("networkpolicy %s/%s: spec.policyTypes: unknown type %q", np.Namespace, np.Name, t)
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

func (np *netpol) translate(ix *index) {
	if np.done {
		return
	}
	np.done = true
	ns, name := np.src.Namespace, np.src.Name
	for i, r := range np.src.Spec.Ingress {
		id := fmt.Sprintf("np/%s/%s/ingress/%d", ns, name, i)
		p, ps, err := ix.npRule(ns, r.From, r.Ports)
		if err != nil {
			ix.errorf("networkpolicy %s/%s: spec.ingress[%d]: %w (rule dropped)", ns, name, i, err)
			continue
		}
		if !p.none() {
			np.in = append(np.in, ruleTmpl{id: id, peers: p.model(), ports: ps})
		}
	}
	for i, r := range np.src.Spec.Egress {
		id := fmt.Sprintf("np/%s/%s/egress/%d", ns, name, i)
		p, ps, err := ix.npRule(ns, r.To, r.Ports)
		if err != nil {
			ix.errorf("networkpolicy %s/%s: spec.egress[%d]: %w (rule dropped)", ns, name, i, err)
			continue
		}
		if !p.none() {
			np.out = append(np.out, ix.egressRules(id, p, ps)...)
		}
	}
}

// npRule reads a rule's peers (none: every peer) and ports.
func (ix *index) npRule(ns string, list []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort) (peers, portSpec, error) {
	ps, err := npPorts(ports)
	if err != nil {
		return peers{}, portSpec{}, err
	}
	if len(list) == 0 {
		return peers{any: true}, ps, nil
	}
	var p peers
	for i, peer := range list {
		if err := ix.npPeer(ns, peer, &p); err != nil {
			return peers{}, portSpec{}, fmt.Errorf("peer %d: %w", i, err)
		}
	}
	return p, ps, nil
}

func (ix *index) npPeer(ns string, peer networkingv1.NetworkPolicyPeer, p *peers) error {
	if peer.IPBlock != nil {
		if peer.PodSelector != nil || peer.NamespaceSelector != nil {
			return fmt.Errorf("ipBlock with a selector")
		}
		b, err := ipBlock(peer.IPBlock)
		if err != nil {
			return err
		}
		p.blocks = append(p.blocks, b)
		return nil
	}
	podSel := labels.Everything()
	if peer.PodSelector != nil {
		sel, err := selector(peer.PodSelector)
		if err != nil {
			return fmt.Errorf("podSelector: %w", err)
		}
		podSel = sel
	}
	switch {
	case peer.NamespaceSelector != nil:
		nsSel, err := selector(peer.NamespaceSelector)
		if err != nil {
			return fmt.Errorf("namespaceSelector: %w", err)
		}
		p.pods = append(p.pods, ix.inNamespaces(nsSel, podSel)...)
	case peer.PodSelector != nil:
		p.pods = append(p.pods, ix.inNamespace(ns, podSel)...)
	default:
		return fmt.Errorf("no podSelector, namespaceSelector or ipBlock")
	}
	return nil
}

func ipBlock(b *networkingv1.IPBlock) (policy.Block, error) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return policy.Block{}, fmt.Errorf("ipBlock.cidr: %w", err)
	}
	out := policy.Block{CIDR: cidr.Masked()}
	for _, x := range b.Except {
		px, err := netip.ParsePrefix(x)
		if err != nil {
			return policy.Block{}, fmt.Errorf("ipBlock.except: %w", err)
		}
		out.Except = append(out.Except, px.Masked())
	}
	return out, nil
}

// npPorts reads a rule's ports: none means every port of every protocol.
func npPorts(ports []networkingv1.NetworkPolicyPort) (portSpec, error) {
	if len(ports) == 0 {
		return portSpec{all: true}, nil
	}
	var ps portSpec
	for i, pt := range ports {
		var proto corev1.Protocol
		if pt.Protocol != nil {
			proto = *pt.Protocol
		}
		pr, err := protocol(proto)
		if err != nil {
			return portSpec{}, fmt.Errorf("ports[%d]: %w", i, err)
		}
		switch {
		case pt.Port == nil:
			if pt.EndPort != nil {
				return portSpec{}, fmt.Errorf("ports[%d]: endPort without port", i)
			}
			ps.numbered = append(ps.numbered, policy.Port{Protocol: pr})
		case pt.Port.Type == intstr.String:
			if pt.EndPort != nil {
				return portSpec{}, fmt.Errorf("ports[%d]: endPort with the named port %q", i, pt.Port.StrVal)
			}
			ps.named = append(ps.named, portName{name: pt.Port.StrVal, proto: pr})
		default:
			port, err := portRange(pt.Port.IntVal, pt.EndPort)
			if err != nil {
				return portSpec{}, fmt.Errorf("ports[%d]: %w", i, err)
			}
			port.Protocol = pr
			ps.numbered = append(ps.numbered, port)
		}
	}
	return ps, nil
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
