package daemon

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// TestNodeTransformKeepsWhatTheDaemonReads: a Node keeps its name, labels,
// estuary's annotations and addresses, and loses the rest.
func TestNodeTransformKeepsWhatTheDaemonReads(t *testing.T) {
	n := objtest.Cluster{Nodes: 1}.NodeAt(0)
	n.Annotations["node.alpha.kubernetes.io/ttl"] = "0"
	n.Spec.PodCIDR = "10.244.0.0/24"
	n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: {}}
	n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	got, err := nodeTransform(&n)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0", Labels: n.Labels, Annotations: map[string]string{
		estuaryv1.AnnotationVTEPIP: n.Annotations[estuaryv1.AnnotationVTEPIP], estuaryv1.AnnotationVTEPMAC: n.Annotations[estuaryv1.AnnotationVTEPMAC]}},
		Status: corev1.NodeStatus{Addresses: n.Status.Addresses}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("transformed node\n%+v\nwant\n%+v", got, want)
	}
	if x, _ := nodeTransform("not a node"); x != "not a node" {
		t.Errorf("a non-node changed: %v", x)
	}
}
