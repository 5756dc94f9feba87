package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func req(key, value string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}
}

// Alternatives are ORed terms, each ANDed with the pod's own terms, and a
// second call changes nothing.
func TestAddAlternatives(t *testing.T) {
	a, b := []corev1.NodeSelectorRequirement{req("rack", "r1")}, []corev1.NodeSelectorRequirement{req("rack", "r2")}
	own := req("disk", "ssd")

	p := &corev1.Pod{}
	if !AddAlternatives(p, [][]corev1.NodeSelectorRequirement{a, b}) {
		t.Fatal("no change on a pod without affinity")
	}
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 2 || terms[0].MatchExpressions[0].Values[0] != "r1" || terms[1].MatchExpressions[0].Values[0] != "r2" {
		t.Fatalf("terms %+v, want one per alternative", terms)
	}
	if AddAlternatives(p, [][]corev1.NodeSelectorRequirement{a, b}) {
		t.Error("second call changed the pod")
	}

	p = &corev1.Pod{Spec: corev1.PodSpec{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
			{MatchExpressions: []corev1.NodeSelectorRequirement{own}},
			{MatchExpressions: []corev1.NodeSelectorRequirement{req("disk", "nvme")}},
		}}}}}}
	AddAlternatives(p, [][]corev1.NodeSelectorRequirement{a, b})
	terms = p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if len(terms) != 4 {
		t.Fatalf("%d terms, want 2 own x 2 alternatives", len(terms))
	}
	for i, want := range [][2]string{{"ssd", "r1"}, {"ssd", "r2"}, {"nvme", "r1"}, {"nvme", "r2"}} {
		m := terms[i].MatchExpressions
		if len(m) != 2 || m[0].Values[0] != want[0] || m[1].Values[0] != want[1] {
			t.Errorf("term %d = %+v, want disk=%s and rack=%s", i, m, want[0], want[1])
		}
	}
	if AddAlternatives(p, [][]corev1.NodeSelectorRequirement{a, b}) {
		t.Error("second call on the crossed terms changed the pod")
	}
	if AddAlternatives(&corev1.Pod{}, nil) {
		t.Error("no alternatives changed the pod")
	}
}
