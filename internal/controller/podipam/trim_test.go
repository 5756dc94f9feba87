package podipam

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTrimPodKeepsWhatTheControllersRead(t *testing.T) {
	now := metav1.Now()
	aff := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{}}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "a", Namespace: "ns", UID: "u", Labels: map[string]string{"app": "a"},
			Annotations:       map[string]string{"networking.estuary.io/network": "n"},
			OwnerReferences:   []metav1.OwnerReference{{Kind: "StatefulSet", Name: "s"}},
			Finalizers:        []string{"f"},
			DeletionTimestamp: &now,
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1", HostNetwork: true, Affinity: aff,
			Containers: []corev1.Container{{Name: "c", Image: "i"}},
			Volumes:    []corev1.Volume{{Name: "v"}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady}},
		},
	}
	got, err := TrimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	p := got.(*corev1.Pod)
	if p.Name != "a" || p.Namespace != "ns" || p.UID != "u" || p.Labels["app"] != "a" ||
		p.Annotations["networking.estuary.io/network"] != "n" || len(p.OwnerReferences) != 1 ||
		len(p.Finalizers) != 1 || p.DeletionTimestamp == nil {
		t.Errorf("metadata lost: %+v", p.ObjectMeta)
	}
	if p.ManagedFields != nil {
		t.Errorf("managed fields kept: %v", p.ManagedFields)
	}
	if p.Spec.NodeName != "node-1" || !p.Spec.HostNetwork || p.Spec.Affinity != aff {
		t.Errorf("spec lost what is read: %+v", p.Spec)
	}
	if p.Spec.Containers != nil || p.Spec.Volumes != nil {
		t.Errorf("spec kept what is never read: %+v", p.Spec)
	}
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP != "10.0.0.1" || len(p.Status.PodIPs) != 1 {
		t.Errorf("status lost what is read: %+v", p.Status)
	}
	if p.Status.Conditions != nil {
		t.Errorf("status kept conditions: %v", p.Status.Conditions)
	}
	if other, err := TrimPod("not a pod"); err != nil || other != "not a pod" {
		t.Errorf("TrimPod(non-pod) = %v, %v; want it unchanged", other, err)
	}
}
