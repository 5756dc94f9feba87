package webhook

import (
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/controller/nodelabel"
)

// DomainSelector returns the node selector a pod with this network must be
// scheduled by: an Underlay network's nodeSelector, nil for any other.
func DomainSelector(n *estuaryv1.Network) map[string]string {
	if n == nil || n.Spec.Type != estuaryv1.NetworkTypeUnderlay || len(n.Spec.NodeSelector) == 0 {
		return nil
	}
	return n.Spec.NodeSelector
}

// AddDomainAffinity ANDs selector, as one In requirement per label, into
// every term of the pod's required node affinity, creating the affinity
// (one term) if the pod has none. The pod's own requirements are kept. It
// reports whether the pod changed; a second call with the same selector
// changes nothing.
func AddDomainAffinity(pod *corev1.Pod, selector map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	return AddRequirements(pod, requirements(selector))
}

// requirements turns a label selector into In requirements, keys sorted.
func requirements(selector map[string]string) []corev1.NodeSelectorRequirement {
	keys := slices.Sorted(maps.Keys(selector))
	reqs := make([]corev1.NodeSelectorRequirement, 0, len(keys))
	for _, k := range keys {
		reqs = append(reqs, corev1.NodeSelectorRequirement{
			Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{selector[k]},
		})
	}
	return reqs
}

func hasRequirement(have []corev1.NodeSelectorRequirement, r corev1.NodeSelectorRequirement) bool {
	for i := range have {
		if equality.Semantic.DeepEqual(have[i], r) {
			return true
		}
	}
	return false
}

// AvailabilityRequirements returns, for each address family a pod needs
// from network, the node requirement that the network still has a free
// address of that family: the key nodelabel.AvailableKey NotIn ["false"].
// A node whose label says the network is full in a family the pod needs
// then does not fit, and a pod whose network is full everywhere stays
// Pending with the scheduler's node affinity reason. NotIn also matches a
// node without the label (not yet labelled), which keeps the pod
// schedulable until the manager has counted.
func AvailabilityRequirements(network string, families []nodelabel.Family) []corev1.NodeSelectorRequirement {
	reqs := make([]corev1.NodeSelectorRequirement, 0, len(families))
	for _, f := range families {
		reqs = append(reqs, corev1.NodeSelectorRequirement{
			Key: nodelabel.AvailableKey(network, f), Operator: corev1.NodeSelectorOpNotIn, Values: []string{nodelabel.ValueFalse},
		})
	}
	return reqs
}

// FamiliesNeeded lists, IPv4 first, the families a pod with this selection
// takes a new address of from the pool of network n, as the manager's
// allocator resolves them: the families of the ip-family annotation, else
// every family n has a public (non-private) subnet of. A pod that names its
// subnets needs none: the availability labels describe the network's
// public pool, not one subnet (which may be private).
func FamiliesNeeded(sel *Selection, n *estuaryv1.Network, subnets []estuaryv1.Subnet) []nodelabel.Family {
	if len(sel.Subnets) > 0 {
		return nil
	}
	switch sel.IPFamily {
	case estuaryv1.IPFamilyIPv4:
		return []nodelabel.Family{nodelabel.IPv4}
	case estuaryv1.IPFamilyIPv6:
		return []nodelabel.Family{nodelabel.IPv6}
	case estuaryv1.IPFamilyDualStack:
		return []nodelabel.Family{nodelabel.IPv4, nodelabel.IPv6}
	}
	var has4, has6 bool
	for i := range subnets {
		s := &subnets[i]
		if s.Spec.Network != n.Name || s.Spec.Private {
			continue
		}
		if p, err := netip.ParsePrefix(s.Spec.Range.CIDR); err == nil && p.Addr().Is4() || err != nil && s.Spec.Range.Version != 6 {
			has4 = true
		} else {
			has6 = true
		}
	}
	var fams []nodelabel.Family
	if has4 {
		fams = append(fams, nodelabel.IPv4)
	}
	if has6 {
		fams = append(fams, nodelabel.IPv6)
	}
	return fams
}

// AddRequirements ANDs reqs into every term of the pod's required node
// affinity, creating the affinity (one term) if the pod has none, and
// reports whether the pod changed. Requirements a term already has are not
// added again.
func AddRequirements(pod *corev1.Pod, reqs []corev1.NodeSelectorRequirement) bool {
	if len(reqs) == 0 {
		return false
	}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := pod.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	required := na.RequiredDuringSchedulingIgnoredDuringExecution
	if len(required.NodeSelectorTerms) == 0 {
		required.NodeSelectorTerms = []corev1.NodeSelectorTerm{{MatchExpressions: slices.Clone(reqs)}}
		return true
	}
	changed := false
	for i := range required.NodeSelectorTerms {
		term := &required.NodeSelectorTerms[i]
		for _, r := range reqs {
			if !hasRequirement(term.MatchExpressions, r) {
				term.MatchExpressions = append(term.MatchExpressions, r)
				changed = true
			}
		}
	}
	return changed
}
