package remote

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// TestRecordDecodesWhatTheDataPathReads decodes a whole IPInstance, as the
// API server sends it, with the scheme of Records: the name, version,
// labels, address and phase are kept, and nothing else is held.
func TestRecordDecodesWhatTheDataPathReads(t *testing.T) {
	ipi := estuaryv1.IPInstance{TypeMeta: metav1.TypeMeta{APIVersion: estuaryv1.GroupVersion.String(), Kind: "IPInstance"},
		ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.3", ResourceVersion: "42", UID: "u-1",
			Labels:        map[string]string{estuaryv1.LabelNode: "node-b", estuaryv1.LabelPod: "web-0"},
			Annotations:   map[string]string{estuaryv1.AnnotationAddresses: "1"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "estuary-manager"}}},
		Spec: estuaryv1.IPInstanceSpec{Network: "overlay", Subnet: "overlay-v4",
			Address: estuaryv1.InstanceAddress{IP: "10.0.0.3/24", Version: 4, MAC: "02:00:00:00:00:03"},
			Binding: estuaryv1.Binding{Namespace: "default", PodName: "web-0", NodeName: "node-b"}},
		Status: estuaryv1.IPInstanceStatus{Phase: estuaryv1.IPInstanceBound}}
	data, err := json.Marshal(&ipi)
	if err != nil {
		t.Fatal(err)
	}
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	obj, gvk, err := serializer.NewCodecFactory(s).UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := obj.(*Record)
	if !ok || gvk.Kind != "IPInstance" {
		t.Fatalf("decoded %T (%v), want a *Record of kind IPInstance", obj, gvk)
	}
	want := &Record{meta: meta{Name: "10.0.0.3", ResourceVersion: "42", Labels: ipi.Labels, Annotations: ipi.Annotations},
		Spec: Spec{Address: Address{IP: "10.0.0.3/24"}}, Status: Status{Phase: estuaryv1.IPInstanceBound}}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("decoded %+v, want %+v", r, want)
	}
	if r.Node() != "node-b" || !r.Bound() {
		t.Errorf("Node() = %q, Bound() = %v; want node-b, true", r.Node(), r.Bound())
	}
	if got := FromInstance(&ipi); got.Name != r.Name || got.Spec != r.Spec || got.Status != r.Status {
		t.Errorf("FromInstance = %+v, want %+v", got, r)
	}
	if n := unsafe.Sizeof(Record{}); n > 80 {
		t.Errorf("a Record is %d bytes, want at most 80", n)
	}
}

// TestTransformSharesANodesLabels: every record of a node holds one label
// map, its node's alone, and no annotations; a record of no node keeps no
// labels; anything else passes unchanged.
func TestTransformSharesANodesLabels(t *testing.T) {
	tr := Transform()
	rec := func(name, node string) *Record {
		r := &Record{meta: meta{Name: name, Labels: map[string]string{estuaryv1.LabelPod: name},
			Annotations: map[string]string{estuaryv1.AnnotationAddresses: "1"}}}
		if node != "" {
			r.Labels[estuaryv1.LabelNode] = node
		}
		out, err := tr(r)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*Record)
	}
	a, b, c, none := rec("a", "node-b"), rec("b", "node-b"), rec("c", "node-c"), rec("d", "")
	if !reflect.DeepEqual(a.Labels, map[string]string{estuaryv1.LabelNode: "node-b"}) || a.Annotations != nil {
		t.Errorf("transformed record's labels %v, annotations %v; want its node's alone, none", a.Labels, a.Annotations)
	}
	mapOf := func(r *Record) unsafe.Pointer { return reflect.ValueOf(r.Labels).UnsafePointer() }
	if mapOf(a) != mapOf(b) || mapOf(a) == mapOf(c) {
		t.Error("want one label map per node, shared by its records")
	}
	if none.Labels != nil {
		t.Errorf("a record of no node keeps labels %v", none.Labels)
	}
	if x, _ := tr("not a record"); x != "not a record" {
		t.Errorf("a non-record changed: %v", x)
	}
}

// TestOtherNodesSelectsTheRecordsOfOtherNodes: records labelled with
// another node are selected; this node's and those of no node are not; a
// node name that is no label value is refused.
func TestOtherNodesSelectsTheRecordsOfOtherNodes(t *testing.T) {
	sel, err := OtherNodes("node-a")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		labels labels.Set
		want   bool
	}{
		{labels.Set{estuaryv1.LabelNode: "node-b"}, true},
		{labels.Set{estuaryv1.LabelNode: "node-a"}, false},
		{labels.Set{estuaryv1.LabelSubnet: "overlay-v4"}, false},
	} {
		if got := sel.Matches(c.labels); got != c.want {
			t.Errorf("%q matches %v: %v, want %v", sel, c.labels, got, c.want)
		}
	}
	if _, err := OtherNodes("not a label value!"); err == nil {
		t.Error("OtherNodes of an invalid label value: no error")
	}
}
