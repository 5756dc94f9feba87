package policytranslate

// AdminNetworkPolicy and BaselineAdminNetworkPolicy (network-policy-api
// v1alpha1) are read as the ClusterNetworkPolicies they convert to: an
// AdminNetworkPolicy is a ClusterNetworkPolicy of tier Admin with its
// priority, the BaselineAdminNetworkPolicy one of tier Baseline; action
// Allow is Accept, a port (portNumber, portRange, namedPort) is the
// protocol entry of the same index, subjects and peers are unchanged.
//
// Names. A converted object is named "anp:<name>" or "banp:<name>", so its
// rule IDs ("cnp/anp:<name>/ingress/0") cannot be those of a
// ClusterNetworkPolicy: ':' is not allowed in an object's name.
//
// Order. Within a tier, policies come in priority order; at equal
// priority every ClusterNetworkPolicy comes before every converted
// object, and each kind among itself by name. The BaselineAdminNetworkPolicy
// has no priority: it comes after every Baseline-tier ClusterNetworkPolicy.

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// Name prefixes of converted AdminNetworkPolicies and
// BaselineAdminNetworkPolicies.
const (
	ANPPrefix  = "anp:"
	BANPPrefix = "banp:"
)

// baselinePriority is the converted BaselineAdminNetworkPolicy's priority:
// the highest a ClusterNetworkPolicy may have, and at equal priority
// ClusterNetworkPolicies come first.
const baselinePriority = 1000

// adminTiers is the admin and baseline tiers of every cluster-scoped
// policy of in, in evaluation order (see the notes above).
func (ix *index) adminTiers(in PolicyInput) (admin, baseline []adminPolicy) {
	if len(in.AdminNetworkPolicies) == 0 && len(in.BaselineAdminNetworkPolicies) == 0 {
		return ix.clusterPolicies(in.ClusterPolicies)
	}
	var legacy []npv1beta1.ClusterNetworkPolicy
	for i := range in.AdminNetworkPolicies {
		cnp, probs := FromAdminNetworkPolicy(&in.AdminNetworkPolicies[i])
		ix.report(cnpRef(cnp.Name), probs)
		legacy = append(legacy, cnp)
	}
	for i := range in.BaselineAdminNetworkPolicies {
		cnp, probs := FromBaselineAdminNetworkPolicy(&in.BaselineAdminNetworkPolicies[i])
		ix.report(cnpRef(cnp.Name), probs)
		legacy = append(legacy, cnp)
	}
	byPriority := func(list []npv1beta1.ClusterNetworkPolicy) map[int32][]npv1beta1.ClusterNetworkPolicy {
		m := map[int32][]npv1beta1.ClusterNetworkPolicy{}
		for _, c := range list {
			m[c.Spec.Priority] = append(m[c.Spec.Priority], c)
		}
		return m
	}
	cnps, old := byPriority(in.ClusterPolicies), byPriority(legacy)
	var prios []int32
	for _, m := range []map[int32][]npv1beta1.ClusterNetworkPolicy{cnps, old} {
		for p := range m {
			prios = append(prios, p)
		}
	}
	slices.Sort(prios)
	for _, p := range slices.Compact(prios) {
		for _, group := range [][]npv1beta1.ClusterNetworkPolicy{cnps[p], old[p]} {
			a, b := ix.clusterPolicies(group)
			admin, baseline = append(admin, a...), append(baseline, b...)
		}
	}
	return admin, baseline
}

// AdminNetworkPolicyProblems lists what of anp no node can enforce as
// written, in field order and with anp's field names; nil when every part
// of it is enforced.
func AdminNetworkPolicyProblems(anp *npv1alpha1.AdminNetworkPolicy) []Problem {
	cnp, probs := FromAdminNetworkPolicy(anp)
	return mergeProblems(probs, convertedProblems(cnp))
}

// BaselineAdminNetworkPolicyProblems is AdminNetworkPolicyProblems for a
// BaselineAdminNetworkPolicy.
func BaselineAdminNetworkPolicyProblems(banp *npv1alpha1.BaselineAdminNetworkPolicy) []Problem {
	cnp, probs := FromBaselineAdminNetworkPolicy(banp)
	return mergeProblems(probs, convertedProblems(cnp))
}

// convertedProblems are the problems of a converted object's translation,
// which reports them as its original kind's (cnpRef).
func convertedProblems(cnp npv1beta1.ClusterNetworkPolicy) []Problem {
	ix := newIndex(PolicyInput{})
	ix.clusterPolicies([]npv1beta1.ClusterNetworkPolicy{cnp})
	return ix.problemsOf(cnpRef(cnp.Name))
}

// mergeProblems joins the conversion's problems with those of the
// converted object, named with the v1alpha1 fields ("protocols" of a rule
// is its "ports"), one per field, in field order.
func mergeProblems(conv, converted []Problem) []Problem {
	out := slices.Clone(conv)
	for _, p := range converted {
		p.Field = strings.ReplaceAll(p.Field, "].protocols", "].ports")
		if !slices.ContainsFunc(out, func(q Problem) bool { return q.Field == p.Field }) {
			out = append(out, p)
		}
	}
	slices.SortStableFunc(out, func(a, b Problem) int { return compareFields(a.Field, b.Field) })
	if len(out) == 0 {
		return nil
	}
	return out
}

// compareFields orders field paths as they appear in an object: indexes
// by number ("[2]" before "[10]"), the rest by text.
func compareFields(a, b string) int {
	for a != "" && b != "" {
		na, ra := leadingNumber(a)
		nb, rb := leadingNumber(b)
		if na >= 0 && nb >= 0 {
			if c := cmp.Compare(na, nb); c != 0 {
				return c
			}
			a, b = ra, rb
			continue
		}
		if c := cmp.Compare(a[0], b[0]); c != 0 {
			return c
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

// leadingNumber is the number s starts with and the rest; -1 when s does
// not start with a digit.
func leadingNumber(s string) (int, string) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 || i > 9 {
		return -1, s
	}
	n, _ := strconv.Atoi(s[:i])
	return n, s[i:]
}

// FromAdminNetworkPolicy converts anp into the ClusterNetworkPolicy of tier
// Admin the node enforces, named ANPPrefix+name. A port it cannot convert
// becomes an empty protocol entry, which makes its rule unreadable (so it
// fails closed, as an unreadable ClusterNetworkPolicy rule does), and is
// returned as a problem.
func FromAdminNetworkPolicy(anp *npv1alpha1.AdminNetworkPolicy) (npv1beta1.ClusterNetworkPolicy, []Problem) {
	out := npv1beta1.ClusterNetworkPolicy{}
	out.Name = ANPPrefix + anp.Name
	out.Spec = npv1beta1.ClusterNetworkPolicySpec{Tier: npv1beta1.AdminTier, Priority: anp.Spec.Priority,
		Subject: convertSubject(anp.Spec.Subject)}
	var probs []Problem
	for i, r := range anp.Spec.Ingress {
		protos, p := convertPorts(fmt.Sprintf("spec.ingress[%d].ports", i), r.Ports)
		probs = append(probs, p...)
		out.Spec.Ingress = append(out.Spec.Ingress, npv1beta1.ClusterNetworkPolicyIngressRule{Name: r.Name,
			Action: convertAction(string(r.Action)), From: convertIngressPeers(r.From), Protocols: protos})
	}
	for i, r := range anp.Spec.Egress {
		protos, p := convertPorts(fmt.Sprintf("spec.egress[%d].ports", i), r.Ports)
		probs = append(probs, p...)
		to := make([]npv1beta1.ClusterNetworkPolicyEgressPeer, len(r.To))
		for j, peer := range r.To {
			to[j] = egressPeer(peer.Namespaces, peer.Pods, peer.Nodes, peer.Networks)
			for _, d := range peer.DomainNames {
				to[j].DomainNames = append(to[j].DomainNames, npv1beta1.DomainName(d))
			}
		}
		out.Spec.Egress = append(out.Spec.Egress, npv1beta1.ClusterNetworkPolicyEgressRule{Name: r.Name,
			Action: convertAction(string(r.Action)), To: to, Protocols: protos})
	}
	return out, probs
}

// FromBaselineAdminNetworkPolicy converts banp into the ClusterNetworkPolicy
// of tier Baseline the node enforces, named BANPPrefix+name, as
// FromAdminNetworkPolicy does.
func FromBaselineAdminNetworkPolicy(banp *npv1alpha1.BaselineAdminNetworkPolicy) (npv1beta1.ClusterNetworkPolicy, []Problem) {
	out := npv1beta1.ClusterNetworkPolicy{}
	out.Name = BANPPrefix + banp.Name
	out.Spec = npv1beta1.ClusterNetworkPolicySpec{Tier: npv1beta1.BaselineTier, Priority: baselinePriority,
		Subject: convertSubject(banp.Spec.Subject)}
	var probs []Problem
	for i, r := range banp.Spec.Ingress {
		protos, p := convertPorts(fmt.Sprintf("spec.ingress[%d].ports", i), r.Ports)
		probs = append(probs, p...)
		out.Spec.Ingress = append(out.Spec.Ingress, npv1beta1.ClusterNetworkPolicyIngressRule{Name: r.Name,
			Action: convertAction(string(r.Action)), From: convertIngressPeers(r.From), Protocols: protos})
	}
	for i, r := range banp.Spec.Egress {
		protos, p := convertPorts(fmt.Sprintf("spec.egress[%d].ports", i), r.Ports)
		probs = append(probs, p...)
		to := make([]npv1beta1.ClusterNetworkPolicyEgressPeer, len(r.To))
		for j, peer := range r.To {
			to[j] = egressPeer(peer.Namespaces, peer.Pods, peer.Nodes, peer.Networks)
		}
		out.Spec.Egress = append(out.Spec.Egress, npv1beta1.ClusterNetworkPolicyEgressRule{Name: r.Name,
			Action: convertAction(string(r.Action)), To: to, Protocols: protos})
	}
	return out, probs
}

// convertAction: Allow is Accept; Deny and Pass keep their names, and an
// unknown action stays unknown (its rule is unreadable).
func convertAction(a string) npv1beta1.ClusterNetworkPolicyRuleAction {
	if a == string(npv1alpha1.AdminNetworkPolicyRuleActionAllow) {
		return npv1beta1.ClusterNetworkPolicyRuleActionAccept
	}
	return npv1beta1.ClusterNetworkPolicyRuleAction(a)
}

func convertPods(p *npv1alpha1.NamespacedPod) *npv1beta1.NamespacedPod {
	if p == nil {
		return nil
	}
	return &npv1beta1.NamespacedPod{NamespaceSelector: p.NamespaceSelector, PodSelector: p.PodSelector}
}

func convertSubject(s npv1alpha1.AdminNetworkPolicySubject) npv1beta1.ClusterNetworkPolicySubject {
	return npv1beta1.ClusterNetworkPolicySubject{Namespaces: s.Namespaces, Pods: convertPods(s.Pods)}
}

func convertIngressPeers(from []npv1alpha1.AdminNetworkPolicyIngressPeer) []npv1beta1.ClusterNetworkPolicyIngressPeer {
	out := make([]npv1beta1.ClusterNetworkPolicyIngressPeer, len(from))
	for i, p := range from {
		out[i] = npv1beta1.ClusterNetworkPolicyIngressPeer{Namespaces: p.Namespaces, Pods: convertPods(p.Pods)}
	}
	return out
}

func egressPeer(ns *metav1.LabelSelector, pods *npv1alpha1.NamespacedPod, nodes *metav1.LabelSelector,
	networks []npv1alpha1.CIDR) npv1beta1.ClusterNetworkPolicyEgressPeer {
	out := npv1beta1.ClusterNetworkPolicyEgressPeer{Namespaces: ns, Pods: convertPods(pods), Nodes: nodes}
	for _, n := range networks {
		out.Networks = append(out.Networks, npv1beta1.CIDR(n))
	}
	return out
}

// convertPorts converts a rule's ports (nil: every port) into protocol
// entries of the same index.
func convertPorts(field string, ports *[]npv1alpha1.AdminNetworkPolicyPort) ([]npv1beta1.ClusterNetworkPolicyProtocol, []Problem) {
	if ports == nil {
		return nil, nil
	}
	out := make([]npv1beta1.ClusterNetworkPolicyProtocol, len(*ports))
	var probs []Problem
	for i, p := range *ports {
		var err error
		out[i], err = convertPort(p)
		if err != nil {
			probs = append(probs, Problem{Field: fmt.Sprintf("%s[%d]", field, i),
				Message: err.Error() + "; the rule is not read (an Allow rule matches nothing, a Deny or Pass rule denies all)"})
			out[i] = npv1beta1.ClusterNetworkPolicyProtocol{}
		}
	}
	return out, probs
}

func convertPort(p npv1alpha1.AdminNetworkPolicyPort) (npv1beta1.ClusterNetworkPolicyProtocol, error) {
	var set int
	for _, isSet := range []bool{p.PortNumber != nil, p.PortRange != nil, p.NamedPort != nil} {
		if isSet {
			set++
		}
	}
	if set != 1 {
		return npv1beta1.ClusterNetworkPolicyProtocol{}, fmt.Errorf("%d of portNumber, portRange and namedPort are set (exactly one)", set)
	}
	switch {
	case p.NamedPort != nil:
		return npv1beta1.ClusterNetworkPolicyProtocol{DestinationNamedPort: *p.NamedPort}, nil
	case p.PortNumber != nil:
		if p.PortNumber.Port < 1 || p.PortNumber.Port > 65535 {
			return npv1beta1.ClusterNetworkPolicyProtocol{}, fmt.Errorf("portNumber.port %d is not 1-65535", p.PortNumber.Port)
		}
		return withProtocol(p.PortNumber.Protocol, npv1beta1.Port{Number: p.PortNumber.Port})
	}
	r := p.PortRange
	if r.Start < 1 || r.End > 65535 || r.Start > r.End {
		return npv1beta1.ClusterNetworkPolicyProtocol{}, fmt.Errorf("portRange %d-%d is not a range within 1-65535", r.Start, r.End)
	}
	if r.Start == r.End {
		return withProtocol(r.Protocol, npv1beta1.Port{Number: r.Start})
	}
	return withProtocol(r.Protocol, npv1beta1.Port{Range: &npv1beta1.PortRange{Start: r.Start, End: r.End}})
}

// withProtocol is the entry matching port of protocol proto (empty: TCP,
// the CRD's default).
func withProtocol(proto corev1.Protocol, port npv1beta1.Port) (npv1beta1.ClusterNetworkPolicyProtocol, error) {
	switch proto {
	case corev1.ProtocolTCP, "":
		return npv1beta1.ClusterNetworkPolicyProtocol{TCP: &npv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &port}}, nil
	case corev1.ProtocolUDP:
		return npv1beta1.ClusterNetworkPolicyProtocol{UDP: &npv1beta1.ClusterNetworkPolicyProtocolUDP{DestinationPort: &port}}, nil
	case corev1.ProtocolSCTP:
		return npv1beta1.ClusterNetworkPolicyProtocol{SCTP: &npv1beta1.ClusterNetworkPolicyProtocolSCTP{DestinationPort: &port}}, nil
	}
	return npv1beta1.ClusterNetworkPolicyProtocol{}, fmt.Errorf("protocol %q is not TCP, UDP or SCTP", proto)
}
