package manager

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTrimNodeDropsImagesAndVolumesOnly(t *testing.T) {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"l": "v"},
			Annotations: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{PodCIDR: "10.0.0.0/24", Taints: []corev1.Taint{{Key: "t"}}},
		Status: corev1.NodeStatus{
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}},
			Conditions:      []corev1.NodeCondition{{Type: corev1.NodeReady}},
			Images:          []corev1.ContainerImage{{Names: []string{"i"}}},
			VolumesInUse:    []corev1.UniqueVolumeName{"v"},
			VolumesAttached: []corev1.AttachedVolume{{Name: "v"}},
		},
	}
	got, err := trimNode(node)
	if err != nil {
		t.Fatal(err)
	}
	n := got.(*corev1.Node)
	if n.ManagedFields != nil || n.Status.Images != nil || n.Status.VolumesInUse != nil || n.Status.VolumesAttached != nil {
		t.Errorf("kept what the manager never reads: %+v", n)
	}
	if n.Labels["l"] != "v" || n.Annotations["a"] != "b" || n.Spec.PodCIDR == "" || len(n.Spec.Taints) != 1 ||
		len(n.Status.Addresses) != 1 || len(n.Status.Conditions) != 1 {
		t.Errorf("lost what the manager reads: %+v", n)
	}
	if other, err := trimNode("not a node"); err != nil || other != "not a node" {
		t.Errorf("trimNode(non-node) = %v, %v; want it unchanged", other, err)
	}
}
