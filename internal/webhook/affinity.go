package webhook

import (
	"maps"
	"slices"

	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/family"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

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
// address of that family: the key netmodel.AvailableKey NotIn ["false"].
// A node whose label says the network is full in a family the pod needs
// then does not fit, and a pod whose network is full everywhere stays
// Pending with the scheduler's node affinity reason. NotIn also matches a
// node without the label (not yet labelled), which keeps the pod
// schedulable until the manager has counted.
func AvailabilityRequirements(network string, families []family.Family) []corev1.NodeSelectorRequirement {
	reqs := make([]corev1.NodeSelectorRequirement, 0, len(families))
	for _, f := range families {
		reqs = append(reqs, corev1.NodeSelectorRequirement{
			Key: netmodel.AvailableKey(network, f), Operator: corev1.NodeSelectorOpNotIn, Values: []string{netmodel.ValueFalse},
		})
	}
	return reqs
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
