package webhook

import (
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
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
	reqs := requirements(selector)
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
		required.NodeSelectorTerms = []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}
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
