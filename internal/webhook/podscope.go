package webhook

// Which pods the pod webhooks act on. Two things keep a pod out, each
// written twice: in the webhook configurations' objectSelector, so the API
// server does not call the webhooks at all (no latency, no dependency on
// the webhook being up), and in the handlers, which admit such a pod
// unchanged when they are called anyway (configurations written by hand,
// or from an older chart):
//
//   - the pod opts out: label networking.estuary.io/webhook=disabled, or
//     hybridnet's webhook.hybridnet.io/ignore=true (or TRUE, the values
//     hybridnet's own objectSelector skips), so manifests written for
//     hybridnet keep their meaning;
//   - the manager serves only the pods its --pod-label-selector selects:
//     the others are not estuary's to admit.
//
// An opted-out pod loses what the webhooks give at admission: the node
// affinity for its Underlay network's domain and for free capacity, and the
// early denial of a bad selection or fixed address. The manager still
// applies the same rules before it allocates (netmodel), and refuses with
// an event on the pod.

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// HybridnetIgnoreLabel is hybridnet's per-pod opt-out of its webhook; its
// values hybridnetIgnoreValues opt a pod out of estuary's too.
const HybridnetIgnoreLabel = "webhook.hybridnet.io/ignore"

// hybridnetIgnoreValues are the values of HybridnetIgnoreLabel that
// hybridnet's webhook configurations skip.
var hybridnetIgnoreValues = []string{"true", "TRUE"}

// PodScope says which pods the pod webhooks act on.
type PodScope struct {
	// Selector is the manager's --pod-label-selector: only the pods it
	// selects are served. Nil or empty: every pod.
	Selector labels.Selector
}

// Serves reports whether the pod webhooks act on pod: it has not opted
// out and Selector selects it.
func (s PodScope) Serves(pod *corev1.Pod) bool {
	l := pod.Labels
	if l[estuaryv1.LabelWebhook] == estuaryv1.WebhookDisabled {
		return false
	}
	for _, v := range hybridnetIgnoreValues {
		if l[HybridnetIgnoreLabel] == v {
			return false
		}
	}
	return s.Selector == nil || s.Selector.Matches(labels.Set(l))
}

// podObjectSelector is the objectSelector of the pod webhooks: not opted
// out (OptOutRequirements), and selected by svc.PodSelector when set.
func podObjectSelector(svc Service) *metav1.LabelSelector {
	sel := &metav1.LabelSelector{MatchExpressions: OptOutRequirements()}
	if p := svc.PodSelector; p != nil {
		if len(p.MatchLabels) > 0 {
			sel.MatchLabels = make(map[string]string, len(p.MatchLabels))
			for k, v := range p.MatchLabels {
				sel.MatchLabels[k] = v
			}
		}
		for _, r := range p.MatchExpressions {
			sel.MatchExpressions = append(sel.MatchExpressions, *r.DeepCopy())
		}
	}
	return sel
}

// OptOutRequirements are the label requirements a pod meets unless it
// opted out of the pod webhooks.
func OptOutRequirements() []metav1.LabelSelectorRequirement {
	return []metav1.LabelSelectorRequirement{
		{Key: estuaryv1.LabelWebhook, Operator: metav1.LabelSelectorOpNotIn, Values: []string{estuaryv1.WebhookDisabled}},
		{Key: HybridnetIgnoreLabel, Operator: metav1.LabelSelectorOpNotIn, Values: append([]string(nil), hybridnetIgnoreValues...)},
	}
}
