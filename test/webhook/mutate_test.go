package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func in(key string, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: values}
}

// domain is the requirement set the webhook adds for u1's selector
// {rack=r1, row=a}, keys sorted.
var domain = []corev1.NodeSelectorRequirement{in("rack", "r1"), in("row", "a")}

func required(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
	}}
}

func TestMutation(t *testing.T) {
	seed(t, overlayNet("ov"), underlayNet("u1", vlan, sel("rack", "r1", "row", "a")),
		subnetObj("ov4", "ov", "10.0.0.0/16"), subnetObj("u4", "u1", "10.2.0.0/24", gw("10.2.0.1")),
		nsObj("domain-ns", sel(annNet, "u1")))
	gpu := corev1.NodeSelectorRequirement{Key: "gpu", Operator: corev1.NodeSelectorOpExists}
	byName := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n1"}}
	preferred := []corev1.PreferredSchedulingTerm{{Weight: 5, Preference: corev1.NodeSelectorTerm{
		MatchExpressions: []corev1.NodeSelectorRequirement{in("disk", "ssd")}}}}
	withPreferred := required(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{gpu}},
		corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{byName}})
	withPreferred.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = preferred
	wantMerged := required(
		corev1.NodeSelectorTerm{MatchExpressions: append([]corev1.NodeSelectorRequirement{gpu}, domain...)},
		corev1.NodeSelectorTerm{MatchExpressions: domain, MatchFields: []corev1.NodeSelectorRequirement{byName}})
	wantMerged.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = preferred
	cases := []struct {
		name string
		pod  *corev1.Pod
		want *corev1.Affinity
	}{
		{"underlay pod without affinity", podObj("default", "plain", sel(annNet, "u1")),
			required(corev1.NodeSelectorTerm{MatchExpressions: domain})},
		{"underlay pod by subnet", podObj("default", "by-subnet", sel(annSub, "u4")),
			required(corev1.NodeSelectorTerm{MatchExpressions: domain})},
		{"namespace's underlay", podObj("domain-ns", "inherited", nil),
			required(corev1.NodeSelectorTerm{MatchExpressions: domain})},
		{"pod's own terms kept, each ANDed", podObj("default", "own", sel(annNet, "u1"), withAffinity(withPreferred)),
			wantMerged},
		{"already constrained to the domain", podObj("default", "already", sel(annNet, "u1"),
			withAffinity(required(corev1.NodeSelectorTerm{MatchExpressions: append([]corev1.NodeSelectorRequirement{gpu}, domain...)}))),
			required(corev1.NodeSelectorTerm{MatchExpressions: append([]corev1.NodeSelectorRequirement{gpu}, domain...)})},
		{"overlay pod unchanged", podObj("default", "overlay", sel(annNet, "ov")), nil},
		{"overlay pod keeps its own affinity", podObj("domain-ns", "own-overlay", sel(annNet, "ov"), withAffinity(withPreferred)),
			withPreferred},
		{"pod without annotations unchanged", podObj("default", "none", nil), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			create(t, c.pod)
			got := &corev1.Pod{}
			if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(c.pod), got); err != nil {
				t.Fatalf("get pod: %v", err)
			}
			if !equality.Semantic.DeepEqual(got.Spec.Affinity, c.want) {
				t.Errorf("affinity =\n%+v\nwant\n%+v", affinityString(got.Spec.Affinity), affinityString(c.want))
			}
		})
	}
}

func affinityString(a *corev1.Affinity) string {
	if a == nil {
		return "<nil>"
	}
	return a.String()
}
