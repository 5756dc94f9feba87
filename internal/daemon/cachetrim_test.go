package daemon

import (
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/translate/objtest"
)

// TestIPInstanceTransformKeepsThisNodesRecordsWhole: a record of this node
// keeps every field but its managed fields; another node's keeps its name,
// node label, address and phase alone, and records of one node share the
// label map.
func TestIPInstanceTransformKeepsThisNodesRecordsWhole(t *testing.T) {
	cl := objtest.Cluster{Nodes: 2, Pods: 4}
	tr := ipInstanceTransform("node-0")
	local := cl.InstanceAt(0)
	local.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "m"}}
	want := cl.InstanceAt(0)
	got, err := tr(&local)
	if err != nil || !reflect.DeepEqual(got, &want) {
		t.Fatalf("this node's record = %+v, %v; want %+v", got, err, want)
	}
	remote := cl.InstanceAt(1)
	got, err = tr(&remote)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := &estuaryv1.IPInstance{ObjectMeta: metav1.ObjectMeta{Name: remote.Name,
		Labels: map[string]string{estuaryv1.LabelNode: "node-1"}}}
	trimmed.Spec.Address.IP, trimmed.Status.Phase = remote.Spec.Address.IP, estuaryv1.IPInstanceBound
	if !reflect.DeepEqual(got, trimmed) {
		t.Fatalf("another node's record = %+v, want %+v", got, trimmed)
	}
	other := cl.InstanceAt(3)
	again, _ := tr(&other)
	mapOf := func(x any) unsafe.Pointer { return reflect.ValueOf(x.(*estuaryv1.IPInstance).Labels).UnsafePointer() }
	if mapOf(again) != mapOf(got) {
		t.Error("two records of node-1 hold two label maps, want one shared")
	}
	if x, _ := tr("not a record"); x != "not a record" {
		t.Errorf("a non-record changed: %v", x)
	}
}

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
