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
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

// adminPolicy is a ClusterNetworkPolicy of either tier: whom it applies
// to and its rules in order, ingress ones still to be resolved against the
// local pod.
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

func readSubject(s npv1beta1.ClusterNetworkPolicySubject) (subject, error) {
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

// clusterPolicies translates the ClusterNetworkPolicies into the admin
// tier and the baseline tier, each in evaluation order: priority, then
// name.
func (ix *index) clusterPolicies(list []npv1beta1.ClusterNetworkPolicy) (admin, baseline []adminPolicy) {
	sorted := slices.Clone(list)
	slices.SortFunc(sorted, func(a, b npv1beta1.ClusterNetworkPolicy) int {
		return cmp.Or(cmp.Compare(a.Spec.Priority, b.Spec.Priority), strings.Compare(a.Name, b.Name))
	})
	for _, cnp := range sorted {
		what := "clusternetworkpolicy " + cnp.Name
		var isBaseline bool
		switch cnp.Spec.Tier {
		case npv1beta1.AdminTier:
		case npv1beta1.BaselineTier:
			isBaseline = true
		default:
			ix.errorf("%s: spec.tier %q is not Admin or Baseline (policy skipped)", what, cnp.Spec.Tier)
			continue
		}
		sub, err := readSubject(cnp.Spec.Subject)
		if err != nil {
			ix.errorf("%s: spec.subject: %w (policy skipped)", what, err)
			continue
		}
		a := adminPolicy{subject: sub}
		for i, r := range cnp.Spec.Ingress {
			from := make([]adminPeer, len(r.From))
			for j, p := range r.From {
				from[j] = adminPeer{namespaces: p.Namespaces, pods: p.Pods}
			}
			a.ingress = append(a.ingress, ix.adminIngress(adminSpec{what: what, baseline: isBaseline,
				id: fmt.Sprintf("cnp/%s/ingress/%d", cnp.Name, i), action: string(r.Action), peers: from, protocols: r.Protocols})...)
		}
		for i, r := range cnp.Spec.Egress {
			to := make([]adminPeer, len(r.To))
			for j, p := range r.To {
				to[j] = adminPeer{namespaces: p.Namespaces, pods: p.Pods, nodes: p.Nodes, networks: p.Networks, domains: len(p.DomainNames) > 0}
			}
			a.egress = append(a.egress, ix.adminEgress(adminSpec{what: what, baseline: isBaseline,
				id: fmt.Sprintf("cnp/%s/egress/%d", cnp.Name, i), action: string(r.Action), peers: to, protocols: r.Protocols})...)
		}
		if isBaseline {
			baseline = append(baseline, a)
		} else {
			admin = append(admin, a)
		}
	}
	return admin, baseline
}

// adminPeer is any admin peer: exactly one field is set.
type adminPeer struct {
	namespaces *metav1.LabelSelector
	pods       *npv1beta1.NamespacedPod
	nodes      *metav1.LabelSelector
	networks   []npv1beta1.CIDR
	domains    bool
}

type adminSpec struct {
	what, id, action string
	baseline         bool
	peers            []adminPeer
	protocols        []npv1beta1.ClusterNetworkPolicyProtocol
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
	// Fail closed: an Accept rule matches nothing, a Deny or Pass rule
	// (a baseline Pass too, though it admits) denies all.
	accept := s.action == string(npv1beta1.ClusterNetworkPolicyRuleActionAccept)
	fail := func(err error) (policy.Action, peers, portSpec, bool) {
		if accept {
			ix.errorf("%s: rule %s: %w (rule dropped)", s.what, s.id, err)
			return policy.Allow, peers{}, portSpec{}, false
		}
		ix.errorf("%s: rule %s: %w (denies all)", s.what, s.id, err)
		return policy.Deny, peers{}, portSpec{}, false
	}
	ps, err := adminProtocols(s.protocols)
	if err != nil {
		return fail(err)
	}
	var p peers
	for i, peer := range s.peers {
		if peer.domains && accept {
			ix.errorf("%s: rule %s: peer %d: domainNames are not supported (the peer matches nothing)", s.what, s.id, i)
			continue
		}
		if err := ix.adminPeer(peer, &p); err != nil {
			return fail(fmt.Errorf("peer %d: %w", i, err))
		}
	}
	return act, p, ps, true
}

// adminAction reads a rule's action. In the baseline tier Pass skips the
// tier's remaining rules, and what no tier decides is admitted: there it
// is Allow.
func adminAction(a string, baseline bool) (policy.Action, error) {
	switch npv1beta1.ClusterNetworkPolicyRuleAction(a) {
	case npv1beta1.ClusterNetworkPolicyRuleActionAccept:
		return policy.Allow, nil
	case npv1beta1.ClusterNetworkPolicyRuleActionDeny:
		return policy.Deny, nil
	case npv1beta1.ClusterNetworkPolicyRuleActionPass:
		if baseline {
			return policy.Allow, nil
		}
		return policy.Pass, nil
	}
	return 0, fmt.Errorf("action %q is not Accept, Deny or Pass", a)
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

// adminProtocols reads a rule's protocols: none means every port of
// every protocol; a protocol without a destination port means each of its
// ports.
func adminProtocols(protos []npv1beta1.ClusterNetworkPolicyProtocol) (portSpec, error) {
	if len(protos) == 0 {
		return portSpec{all: true}, nil
	}
	var ps portSpec
	for i, pt := range protos {
		var (
			proto policy.Protocol
			dest  *npv1beta1.Port
			set   []string
		)
		if pt.TCP != nil {
			proto, dest, set = policy.TCP, pt.TCP.DestinationPort, append(set, "tcp")
		}
		if pt.UDP != nil {
			proto, dest, set = policy.UDP, pt.UDP.DestinationPort, append(set, "udp")
		}
		if pt.SCTP != nil {
			proto, dest, set = policy.SCTP, pt.SCTP.DestinationPort, append(set, "sctp")
		}
		if pt.DestinationNamedPort != "" {
			set = append(set, "destinationNamedPort")
		}
		switch {
		case len(set) > 1:
			return portSpec{}, fmt.Errorf("protocols[%d]: %s are all set (one only)", i, strings.Join(set, ", "))
		case len(set) == 0:
			return portSpec{}, fmt.Errorf("protocols[%d]: no field this version knows is set", i)
		case pt.DestinationNamedPort != "":
			ps.named = append(ps.named, portName{name: pt.DestinationNamedPort, anyProto: true})
			continue
		}
		port, err := destinationPort(dest)
		if err != nil {
			return portSpec{}, fmt.Errorf("protocols[%d].%s.destinationPort: %w", i, set[0], err)
		}
		port.Protocol = proto
		ps.numbered = append(ps.numbered, port)
	}
	return ps, nil
}

// destinationPort is a port number or range; nil (or empty) is every port.
func destinationPort(d *npv1beta1.Port) (policy.Port, error) {
	switch {
	case d == nil || (d.Number == 0 && d.Range == nil):
		return policy.Port{}, nil
	case d.Number != 0 && d.Range != nil:
		return policy.Port{}, errors.New("both number and range are set")
	case d.Range != nil:
		p, err := portRange(d.Range.Start, &d.Range.End)
		if err != nil {
			return policy.Port{}, fmt.Errorf("range: %w", err)
		}
		return p, nil
	}
	p, err := portRange(d.Number, nil)
	if err != nil {
		return policy.Port{}, fmt.Errorf("number: %w", err)
	}
	return p, nil
}
