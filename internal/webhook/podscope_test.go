package webhook

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func scopedPod(lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", Labels: lbls,
		Annotations: map[string]string{estuaryv1.AnnotationNetwork: "nope"}}}
}

func TestPodScopeServes(t *testing.T) {
	sel := labels.SelectorFromSet(labels.Set{"cni": "estuary"})
	cases := []struct {
		name  string
		scope PodScope
		lbls  map[string]string
		want  bool
	}{
		{"no labels, no selector", PodScope{}, nil, true},
		{"estuary opt-out", PodScope{}, map[string]string{estuaryv1.LabelWebhook: estuaryv1.WebhookDisabled}, false},
		{"estuary label other value", PodScope{}, map[string]string{estuaryv1.LabelWebhook: "enabled"}, true},
		{"hybridnet true", PodScope{}, map[string]string{HybridnetIgnoreLabel: "true"}, false},
		{"hybridnet TRUE", PodScope{}, map[string]string{HybridnetIgnoreLabel: "TRUE"}, false},
		{"hybridnet True is not skipped by hybridnet either", PodScope{}, map[string]string{HybridnetIgnoreLabel: "True"}, true},
		{"selected", PodScope{Selector: sel}, map[string]string{"cni": "estuary"}, true},
		{"not selected", PodScope{Selector: sel}, map[string]string{"cni": "other"}, false},
		{"selected but opted out", PodScope{Selector: sel}, map[string]string{"cni": "estuary", estuaryv1.LabelWebhook: estuaryv1.WebhookDisabled}, false},
	}
	for _, c := range cases {
		if got := c.scope.Serves(scopedPod(c.lbls)); got != c.want {
			t.Errorf("%s: Serves = %v, want %v", c.name, got, c.want)
		}
	}
}

// A handler called for a pod outside its scope (a configuration without
// the objectSelector) admits it unchanged without reading anything: the
// handlers have no reader here, so any read would panic.
func TestPodHandlersSkipPodsOutOfScope(t *testing.T) {
	scope := PodScope{Selector: labels.SelectorFromSet(labels.Set{"cni": "estuary"})}
	for _, lbls := range []map[string]string{
		{estuaryv1.LabelWebhook: estuaryv1.WebhookDisabled, "cni": "estuary"},
		{HybridnetIgnoreLabel: "true", "cni": "estuary"},
		{"cni": "other"},
	} {
		pod := scopedPod(lbls)
		before := pod.DeepCopy()
		if _, err := (&PodValidator{Scope: scope}).ValidateCreate(context.Background(), pod); err != nil {
			t.Errorf("pod labelled %v: validating handler: %v", lbls, err)
		}
		if err := (&PodDefaulter{Scope: scope}).Default(context.Background(), pod); err != nil {
			t.Errorf("pod labelled %v: mutating handler: %v", lbls, err)
		}
		if !equality.Semantic.DeepEqual(pod, before) {
			t.Errorf("pod labelled %v was changed: %+v", lbls, pod)
		}
	}
}

// The pod webhooks' objectSelector carries the opt-out requirements and the
// manager's pod selector; the Network and Subnet webhooks have none.
func TestConfigurationsObjectSelector(t *testing.T) {
	podSel := &metav1.LabelSelector{
		MatchLabels:      map[string]string{"cni": "estuary"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"legacy"}}},
	}
	want := &metav1.LabelSelector{
		MatchLabels:      map[string]string{"cni": "estuary"},
		MatchExpressions: append(OptOutRequirements(), podSel.MatchExpressions[0]),
	}
	v, m := Configurations(Service{Namespace: "ns", Name: "svc", Port: 443, PodSelector: podSel})
	for _, w := range v.Webhooks {
		if w.Name != "pod.validate.estuary.io" && w.ObjectSelector != nil {
			t.Errorf("%s has objectSelector %v, want none", w.Name, w.ObjectSelector)
		}
		if w.Name == "pod.validate.estuary.io" && !equality.Semantic.DeepEqual(w.ObjectSelector, want) {
			t.Errorf("%s objectSelector %v, want %v", w.Name, w.ObjectSelector, want)
		}
	}
	if got := m.Webhooks[0].ObjectSelector; !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("%s objectSelector %v, want %v", m.Webhooks[0].Name, got, want)
	}
	v, _ = Configurations(Service{Namespace: "ns", Name: "svc", Port: 443})
	if got := v.Webhooks[2].ObjectSelector; !equality.Semantic.DeepEqual(got, &metav1.LabelSelector{MatchExpressions: OptOutRequirements()}) {
		t.Errorf("without a pod selector: objectSelector %v, want the opt-out requirements only", got)
	}
	s, err := metav1.LabelSelectorAsSelector(want)
	if err != nil {
		t.Fatal(err)
	}
	for lbls, sent := range map[string]bool{"cni=estuary": true, "cni=estuary,tier=legacy": false,
		"cni=estuary,networking.estuary.io/webhook=disabled": false, "cni=estuary,webhook.hybridnet.io/ignore=true": false} {
		set, err := labels.ConvertSelectorToLabelsMap(lbls)
		if err != nil {
			t.Fatal(err)
		}
		if s.Matches(set) != sent {
			t.Errorf("pod labelled %s: sent to the webhook %v, want %v", lbls, s.Matches(set), sent)
		}
	}
}
