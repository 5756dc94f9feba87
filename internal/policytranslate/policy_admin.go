package policytranslate

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

func readSubject(s npv1beta1.ClusterNetworkPolicySubject) (subject, problems) {
	var probs problems
	switch {
	case s.Namespaces != nil:
		ns, err := selector(s.Namespaces)
		if err != nil {
			probs.add("spec.subject.namespaces", err.Error())
		}
		return subject{ns: ns}, probs
	case s.Pods != nil:
		ns, err := selector(&s.Pods.NamespaceSelector)
		if err != nil {
			probs.add("spec.subject.pods.namespaceSelector", err.Error())
		}
		pod, err := selector(&s.Pods.PodSelector)
		if err != nil {
			probs.add("spec.subject.pods.podSelector", err.Error())
		}
		return subject{ns: ns, pod: pod}, probs
	}
	probs.add("spec.subject", "neither namespaces nor pods")
	return subject{}, probs
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

// cnpRef names a ClusterNetworkPolicy, or the AdminNetworkPolicy or
// BaselineAdminNetworkPolicy converted to it (policy_anp.go).
func cnpRef(name string) objRef {
	switch {
	case strings.HasPrefix(name, ANPPrefix):
		return objRef{"AdminNetworkPolicy", "", strings.TrimPrefix(name, ANPPrefix)}
	case strings.HasPrefix(name, BANPPrefix):
		return objRef{"BaselineAdminNetworkPolicy", "", strings.TrimPrefix(name, BANPPrefix)}
	}
	return objRef{KindClusterNetworkPolicy, "", name}
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
		ref := cnpRef(cnp.Name)
		var isBaseline bool
		switch cnp.Spec.Tier {
		case npv1beta1.AdminTier:
		case npv1beta1.BaselineTier:
			isBaseline = true
		default:
			ix.report(ref, problems{{Field: "spec.tier", Message: fmt.Sprintf("tier %q is not Admin or Baseline (policy skipped)", cnp.Spec.Tier)}})
			continue
		}
		sub, probs := readSubject(cnp.Spec.Subject)
		if len(probs) > 0 {
			ix.report(ref, probs.then("policy skipped: nobody knows whom it selects"))
			continue
		}
		a := adminPolicy{subject: sub}
		for i, r := range cnp.Spec.Ingress {
			from := make([]adminPeer, len(r.From))
			for j, p := range r.From {
				from[j] = adminPeer{namespaces: p.Namespaces, pods: p.Pods}
			}
			a.ingress = append(a.ingress, ix.adminIngress(adminSpec{ref: ref, baseline: isBaseline,
				field: fmt.Sprintf("spec.ingress[%d]", i), peerKey: "from",
				id: fmt.Sprintf("cnp/%s/ingress/%d", cnp.Name, i), action: string(r.Action), peers: from, protocols: r.Protocols})...)
		}
		for i, r := range cnp.Spec.Egress {
			to := make([]adminPeer, len(r.To))
			for j, p := range r.To {
				to[j] = adminPeer{namespaces: p.Namespaces, pods: p.Pods, nodes: p.Nodes, networks: p.Networks, domains: len(p.DomainNames) > 0}
			}
			a.egress = append(a.egress, ix.adminEgress(adminSpec{ref: ref, baseline: isBaseline,
				field: fmt.Sprintf("spec.egress[%d]", i), peerKey: "to",
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

// adminSpec is one rule of a ClusterNetworkPolicy: field is its path
// ("spec.ingress[0]"), peerKey "from" or "to".
type adminSpec struct {
	ref                objRef
	field, peerKey, id string
	action             string
	baseline           bool
	peers              []adminPeer
	protocols          []npv1beta1.ClusterNetworkPolicyProtocol
}

// denyAll is the rule an unreadable Deny or Pass rule becomes.
func denyAll(id string) adminTmpl {
	return adminTmpl{action: policy.Deny, ruleTmpl: ruleTmpl{id: id, peers: policy.Peers{Any: true}, ports: portSpec{all: true}}}
}

func (ix *index) adminIngress(s adminSpec) adminIngress {
	act, p, ps, probs := ix.adminRule(s)
	if len(probs) == 0 && !p.none() {
		t := adminTmpl{action: act, ruleTmpl: ruleTmpl{id: s.id, peers: p.model(), ports: ps}}
		err := (policy.Rule{ID: s.id, Peers: t.peers, Ports: ps.numbered}).Validate()
		if err == nil {
			return adminIngress{t}
		}
		probs.add(s.field, err.Error())
	}
	if ix.failClosed(s, probs) {
		return adminIngress{denyAll(s.id)}
	}
	return nil
}

func (ix *index) adminEgress(s adminSpec) []policy.AdminRule {
	act, p, ps, probs := ix.adminRule(s)
	if len(probs) == 0 && !p.none() {
		rules := ix.egressRules(s.id, p, ps)
		err := validateRules(rules)
		if err == nil {
			out := make([]policy.AdminRule, 0, len(rules))
			for _, r := range rules {
				out = append(out, policy.AdminRule{Rule: r, Action: act})
			}
			return out
		}
		probs.add(s.field, err.Error())
	}
	if ix.failClosed(s, probs) {
		d := denyAll(s.id)
		return []policy.AdminRule{{Rule: policy.Rule{ID: d.id, Peers: d.peers}, Action: d.action}}
	}
	return nil
}

// failClosed reports a rule's problems and says whether it denies all:
// network-policy-api's guidance for a peer an implementation cannot
// honour. An Accept rule matches nothing; a Deny or Pass rule (a baseline
// Pass too, though it admits), or one whose action cannot be read, denies
// all.
func (ix *index) failClosed(s adminSpec, probs problems) bool {
	if len(probs) == 0 {
		return false
	}
	if s.action == string(npv1beta1.ClusterNetworkPolicyRuleActionAccept) {
		ix.report(s.ref, probs.then("rule dropped"))
		return false
	}
	ix.report(s.ref, probs.then("rule denies all"))
	return true
}

// adminRule reads a rule: its action, peers and ports, and the problems
// of what cannot be read.
func (ix *index) adminRule(s adminSpec) (policy.Action, peers, portSpec, problems) {
	var probs problems
	act, err := adminAction(s.action, s.baseline)
	if err != nil {
		probs.add(s.field+".action", err.Error())
	}
	var p peers
	for i, peer := range s.peers {
		probs = append(probs, ix.adminPeer(fmt.Sprintf("%s.%s[%d]", s.field, s.peerKey, i), peer, &p)...)
	}
	ps, pprobs := adminProtocols(s.field, s.protocols)
	return act, p, ps, append(probs, pprobs...)
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

func (ix *index) adminPeer(field string, peer adminPeer, p *peers) problems {
	var probs problems
	switch {
	case peer.namespaces != nil:
		sel, err := selector(peer.namespaces)
		if err != nil {
			probs.add(field+".namespaces", err.Error())
			break
		}
		p.pods = append(p.pods, ix.inNamespaces(sel, labels.Everything())...)
	case peer.pods != nil:
		nsSel, err := selector(&peer.pods.NamespaceSelector)
		if err != nil {
			probs.add(field+".pods.namespaceSelector", err.Error())
		}
		podSel, err := selector(&peer.pods.PodSelector)
		if err != nil {
			probs.add(field+".pods.podSelector", err.Error())
		}
		if len(probs) == 0 {
			p.pods = append(p.pods, ix.inNamespaces(nsSel, podSel)...)
		}
	case peer.nodes != nil:
		sel, err := selector(peer.nodes)
		if err != nil {
			probs.add(field+".nodes", err.Error())
			break
		}
		for _, n := range ix.nodes {
			if sel.Matches(n.labels) {
				for _, a := range n.addrs {
					p.blocks = append(p.blocks, policy.Block{CIDR: netip.PrefixFrom(a, a.BitLen())})
				}
			}
		}
	case len(peer.networks) > 0:
		for i, c := range peer.networks {
			pfx, err := unmap(string(c))
			if err != nil {
				probs.add(fmt.Sprintf("%s.networks[%d]", field, i), err.Error())
				continue
			}
			p.blocks = append(p.blocks, policy.Block{CIDR: pfx})
		}
	case peer.domains:
		probs.add(field+".domainNames", "domainNames are not supported")
	default:
		probs.add(field, "no field this version knows is set")
	}
	return probs
}

// adminProtocols reads a rule's protocols (field is the rule's path):
// none means every port of every protocol; a protocol without a
// destination port means each of its ports.
func adminProtocols(field string, protos []npv1beta1.ClusterNetworkPolicyProtocol) (portSpec, problems) {
	if len(protos) == 0 {
		return portSpec{all: true}, nil
	}
	var (
		ps    portSpec
		probs problems
	)
	for i, pt := range protos {
		at := fmt.Sprintf("%s.protocols[%d]", field, i)
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
			probs.add(at, strings.Join(set, ", ")+" are all set (one only)")
			continue
		case len(set) == 0:
			probs.add(at, "no field this version knows is set")
			continue
		case pt.DestinationNamedPort != "":
			ps.named = append(ps.named, portName{name: pt.DestinationNamedPort, anyProto: true})
			continue
		}
		port, err := destinationPort(dest)
		if err != nil {
			probs.add(at+"."+set[0]+".destinationPort", err.Error())
			continue
		}
		port.Protocol = proto
		ps.numbered = append(ps.numbered, port)
	}
	return ps, probs
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
