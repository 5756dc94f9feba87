package translate

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

// adminPolicy is an AdminNetworkPolicy or the BaselineAdminNetworkPolicy:
// whom it applies to and its rules in order, ingress ones still to be
// resolved against the local pod.
type adminPolicy struct {
	subject subject
	ingress adminIngress
	egress  []policy.AdminRule
}

// subject selects the pods of the namespaces ns selects, and among them
// those pod selects (nil: all).
type subject struct {
	ns, pod labels.Selector
}

func (s subject) selects(ix *index, p *podInfo) bool {
	return p.peer && s.ns.Matches(ix.nsLabels[p.key.ns]) && (s.pod == nil || s.pod.Matches(p.labels))
}

func readSubject(s anpv1alpha1.AdminNetworkPolicySubject) (subject, error) {
	switch {
	case s.Namespaces != nil:
		ns, err := selector(s.Namespaces)
		return subject{ns: ns}, err
	case s.Pods != nil:
		ns, err := selector(&s.Pods.NamespaceSelector)
		if err != nil {
			return subject{}, fmt.Errorf("pods.namespaceSelector: %w", err)
		}
		pod, err := selector(&s.Pods.PodSelector)
		if err != nil {
			return subject{}, fmt.Errorf("pods.podSelector: %w", err)
		}
		return subject{ns: ns, pod: pod}, nil
	}
	return subject{}, errors.New("neither namespaces nor pods")
}

type adminTmpl struct {
	action policy.Action
	ruleTmpl
}

type adminIngress []adminTmpl

// forLocal is the rules for the local pod, named ports resolved.
func (a adminIngress) forLocal(pod *podInfo) []policy.AdminRule {
	var out []policy.AdminRule
	for _, t := range a {
		if r, ok := t.forLocal(pod); ok {
			out = append(out, policy.AdminRule{Rule: r, Action: t.action})
		}
	}
	return out
}

// adminPolicies translates the AdminNetworkPolicies in evaluation order:
// priority, then name.
func (ix *index) adminPolicies(list []anpv1alpha1.AdminNetworkPolicy) []adminPolicy {
	sorted := slices.Clone(list)
	slices.SortFunc(sorted, func(a, b anpv1alpha1.AdminNetworkPolicy) int {
		return cmp.Or(cmp.Compare(a.Spec.Priority, b.Spec.Priority), strings.Compare(a.Name, b.Name))
	})
	var out []adminPolicy
	for _, anp := range sorted {
		sub, err := readSubject(anp.Spec.Subject)
		if err != nil {
			ix.errorf("adminnetworkpolicy %s: spec.subject: %w (policy skipped)", anp.Name, err)
			continue
		}
		a := adminPolicy{subject: sub}
		for i, r := range anp.Spec.Ingress {
			from := make([]adminPeer, len(r.From))
			for j, p := range r.From {
				from[j] = adminPeer{namespaces: p.Namespaces, pods: p.Pods}
			}
			a.ingress = append(a.ingress, ix.adminIngress(adminSpec{what: "adminnetworkpolicy " + anp.Name,
				id: fmt.Sprintf("anp/%s/ingress/%d", anp.Name, i), action: string(r.Action), peers: from, ports: r.Ports})...)
		}
		for i, r := range anp.Spec.Egress {
			to := make([]adminPeer, len(r.To))
			for j, p := range r.To {
				to[j] = adminPeer{namespaces: p.Namespaces, pods: p.Pods, nodes: p.Nodes, networks: p.Networks, domains: len(p.DomainNames) > 0}
			}
			a.egress = append(a.egress, ix.adminEgress(adminSpec{what: "adminnetworkpolicy " + anp.Name,
				id: fmt.Sprintf("anp/%s/egress/%d", anp.Name, i), action: string(r.Action), peers: to, ports: r.Ports})...)
		}
		out = append(out, a)
	}
	return out
}

// baselinePolicy translates the BaselineAdminNetworkPolicy named
// "default"; nil when there is none.
func (ix *index) baselinePolicy(list []anpv1alpha1.BaselineAdminNetworkPolicy) *adminPolicy {
	var out *adminPolicy
	for _, b := range list {
		if b.Name != "default" {
			ix.errorf("baselineadminnetworkpolicy %s: only the one named default applies (policy skipped)", b.Name)
			continue
		}
		sub, err := readSubject(b.Spec.Subject)
		if err != nil {
			ix.errorf("baselineadminnetworkpolicy %s: spec.subject: %w (policy skipped)", b.Name, err)
			continue
		}
		out = &adminPolicy{subject: sub}
		for i, r := range b.Spec.Ingress {
			from := make([]adminPeer, len(r.From))
			for j, p := range r.From {
				from[j] = adminPeer{namespaces: p.Namespaces, pods: p.Pods}
			}
			out.ingress = append(out.ingress, ix.adminIngress(adminSpec{what: "baselineadminnetworkpolicy " + b.Name, baseline: true,
				id: fmt.Sprintf("banp/%s/ingress/%d", b.Name, i), action: string(r.Action), peers: from, ports: r.Ports})...)
		}
		for i, r := range b.Spec.Egress {
			to := make([]adminPeer, len(r.To))
			for j, p := range r.To {
				to[j] = adminPeer{namespaces: p.Namespaces, pods: p.Pods, nodes: p.Nodes, networks: p.Networks}
			}
			out.egress = append(out.egress, ix.adminEgress(adminSpec{what: "baselineadminnetworkpolicy " + b.Name, baseline: true,
				id: fmt.Sprintf("banp/%s/egress/%d", b.Name, i), action: string(r.Action), peers: to, ports: r.Ports})...)
		}
	}
	return out
}

// adminPeer is any admin peer: exactly one field is set.
type adminPeer struct {
	namespaces *metav1.LabelSelector
	pods       *anpv1alpha1.NamespacedPod
	nodes      *metav1.LabelSelector
	networks   []anpv1alpha1.CIDR
	domains    bool
}

type adminSpec struct {
	what, id, action string
	baseline         bool
	peers            []adminPeer
	ports            *[]anpv1alpha1.AdminNetworkPolicyPort
}

// denyAll is the rule an unreadable Deny or Pass rule becomes.
func denyAll(id string) adminTmpl {
	return adminTmpl{action: policy.Deny, ruleTmpl: ruleTmpl{id: id, peers: policy.Peers{Any: true}, ports: portSpec{all: true}}}
}

func (ix *index) adminIngress(s adminSpec) adminIngress {
	act, p, ps, ok := ix.adminRule(s)
	if !ok {
		if act == policy.Allow {
			return nil
		}
		return adminIngress{denyAll(s.id)}
	}
	if p.none() {
		return nil
	}
	return adminIngress{{action: act, ruleTmpl: ruleTmpl{id: s.id, peers: p.model(), ports: ps}}}
}

func (ix *index) adminEgress(s adminSpec) []policy.AdminRule {
	act, p, ps, ok := ix.adminRule(s)
	if !ok {
		if act == policy.Allow {
			return nil
		}
		d := denyAll(s.id)
		return []policy.AdminRule{{Rule: policy.Rule{ID: d.id, Peers: d.peers}, Action: d.action}}
	}
	if p.none() {
		return nil
	}
	var out []policy.AdminRule
	for _, r := range ix.egressRules(s.id, p, ps) {
		out = append(out, policy.AdminRule{Rule: r, Action: act})
	}
	return out
}

// adminRule reads a rule; false (reported) when it cannot be read whole.
func (ix *index) adminRule(s adminSpec) (policy.Action, peers, portSpec, bool) {
	act, err := adminAction(s.action, s.baseline)
	if err != nil {
		ix.errorf("%s: rule %s: %w (denies all)", s.what, s.id, err)
		return policy.Deny, peers{}, portSpec{}, false
	}
	fail := func(err error) (policy.Action, peers, portSpec, bool) {
		if act == policy.Allow {
			ix.errorf("%s: rule %s: %w (rule dropped)", s.what, s.id, err)
		} else {
			ix.errorf("%s: rule %s: %w (denies all)", s.what, s.id, err)
		}
		return act, peers{}, portSpec{}, false
	}
	ps, err := adminPorts(s.ports)
	if err != nil {
		return fail(err)
	}
	var p peers
	for i, peer := range s.peers {
		if peer.domains && act == policy.Allow {
			ix.errorf("%s: rule %s: peer %d: domainNames are not supported (the peer matches nothing)", s.what, s.id, i)
			continue
		}
		if err := ix.adminPeer(peer, &p); err != nil {
			return fail(fmt.Errorf("peer %d: %w", i, err))
		}
	}
	return act, p, ps, true
}

func adminAction(a string, baseline bool) (policy.Action, error) {
	switch {
	case a == string(anpv1alpha1.AdminNetworkPolicyRuleActionAllow):
		return policy.Allow, nil
	case a == string(anpv1alpha1.AdminNetworkPolicyRuleActionDeny):
		return policy.Deny, nil
	case a == string(anpv1alpha1.AdminNetworkPolicyRuleActionPass) && !baseline:
		return policy.Pass, nil
	}
	return 0, fmt.Errorf("action %q", a)
}

func (ix *index) adminPeer(peer adminPeer, p *peers) error {
	switch {
	case peer.namespaces != nil:
		sel, err := selector(peer.namespaces)
		if err != nil {
			return fmt.Errorf("namespaces: %w", err)
		}
		p.pods = append(p.pods, ix.inNamespaces(sel, labels.Everything())...)
	case peer.pods != nil:
		nsSel, err := selector(&peer.pods.NamespaceSelector)
		if err != nil {
			return fmt.Errorf("pods.namespaceSelector: %w", err)
		}
		podSel, err := selector(&peer.pods.PodSelector)
		if err != nil {
			return fmt.Errorf("pods.podSelector: %w", err)
		}
		p.pods = append(p.pods, ix.inNamespaces(nsSel, podSel)...)
	case peer.nodes != nil:
		sel, err := selector(peer.nodes)
		if err != nil {
			return fmt.Errorf("nodes: %w", err)
		}
		for _, n := range ix.nodes {
			if sel.Matches(n.labels) {
				for _, a := range n.addrs {
					p.blocks = append(p.blocks, policy.Block{CIDR: netip.PrefixFrom(a, a.BitLen())})
				}
			}
		}
	case len(peer.networks) > 0:
		for _, c := range peer.networks {
			pfx, err := netip.ParsePrefix(string(c))
			if err != nil {
				return fmt.Errorf("networks: %w", err)
			}
			p.blocks = append(p.blocks, policy.Block{CIDR: pfx.Masked()})
		}
	case peer.domains:
		return errors.New("domainNames are not supported")
	default:
		return errors.New("no field this version knows is set")
	}
	return nil
}

// adminPorts reads an admin rule's ports: none means every port.
func adminPorts(ports *[]anpv1alpha1.AdminNetworkPolicyPort) (portSpec, error) {
	if ports == nil || len(*ports) == 0 {
		return portSpec{all: true}, nil
	}
	var ps portSpec
	for i, pt := range *ports {
		switch {
		case pt.PortNumber != nil:
			pr, err := protocol(pt.PortNumber.Protocol)
			if err != nil {
				return portSpec{}, fmt.Errorf("ports[%d].portNumber: %w", i, err)
			}
			port, err := portRange(pt.PortNumber.Port, nil)
			if err != nil {
				return portSpec{}, fmt.Errorf("ports[%d].portNumber: %w", i, err)
			}
			port.Protocol = pr
			ps.numbered = append(ps.numbered, port)
		case pt.PortRange != nil:
			pr, err := protocol(pt.PortRange.Protocol)
			if err != nil {
				return portSpec{}, fmt.Errorf("ports[%d].portRange: %w", i, err)
			}
			port, err := portRange(pt.PortRange.Start, &pt.PortRange.End)
			if err != nil {
				return portSpec{}, fmt.Errorf("ports[%d].portRange: %w", i, err)
			}
			port.Protocol = pr
			ps.numbered = append(ps.numbered, port)
		case pt.NamedPort != nil:
			ps.named = append(ps.named, portName{name: *pt.NamedPort, anyProto: true})
		default:
			return portSpec{}, fmt.Errorf("ports[%d]: no field this version knows is set", i)
		}
	}
	return ps, nil
}
