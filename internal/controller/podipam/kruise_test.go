package podipam

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/workload"
)

// newKruiseSet creates an apps.kruise.io Advanced StatefulSet at version
// with replicas and template annotations, deleted when the test ends.
func newKruiseSet(t *testing.T, ns, name, version string, replicas int64, annotations map[string]any) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": name}, "annotations": annotations}},
		},
	}}
	u.SetAPIVersion(workload.GroupKruise + "/" + version)
	u.SetKind(workload.KindStatefulSet)
	return createObject(t, u, ns, name)
}

// An Advanced StatefulSet's pods are kept like a StatefulSet's: ip-pool and
// mac-pool entry by ordinal, the same address and MAC after a pod is
// re-created elsewhere, released on scale-in and when the set is deleted.
func TestAdvancedStatefulSetKeepsByOrdinal(t *testing.T) {
	overlay(t, "ov-asts", "10.87.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	set := newKruiseSet(t, ns, "kv", "v1beta1", 2, map[string]any{
		estuaryv1.AnnotationIPPool:  "10.87.0.10,10.87.0.11",
		estuaryv1.AnnotationMACPool: "0a:00:00:00:87:10,0a:00:00:00:87:11",
	})
	pool := annotated(estuaryv1.AnnotationIPPool, "10.87.0.10,10.87.0.11")
	macs := annotated(estuaryv1.AnnotationMACPool, "0a:00:00:00:87:10,0a:00:00:00:87:11")
	for i := range 2 {
		newPod(t, ns, fmt.Sprintf("kv-%d", i), controlledBy(set), pool, macs, onNetwork("ov-asts"))
	}
	for i := range 2 {
		ipi := waitInstances(t, ns, fmt.Sprintf("kv-%d", i), 1, estuaryv1.IPInstanceBound)[0]
		o := ipi.Spec.Binding
		if addrOf(t, ipi).String() != fmt.Sprintf("10.87.0.1%d", i) || ipi.Spec.Address.MAC != fmt.Sprintf("0a:00:00:00:87:1%d", i) ||
			o.Owner.Kind != workload.KindKruiseStatefulSet || o.Owner.Name != "kv" || o.StatefulOrdinal == nil || *o.StatefulOrdinal != int32(i) {
			t.Fatalf("kv-%d: %s MAC %q owner %+v ordinal %v; want ip-pool and mac-pool entry %d, owner %s kv", i, ipi.Name, ipi.Spec.Address.MAC, o.Owner, o.StatefulOrdinal, i, workload.KindKruiseStatefulSet)
		}
	}
	deletePod(t, podRef(ns, "kv-1"))
	waitInstances(t, ns, "kv-1", 1, estuaryv1.IPInstanceRetained)
	newPod(t, ns, "kv-1", controlledBy(set), pool, macs, onNetwork("ov-asts"), onNode("node-z"))
	back := waitInstances(t, ns, "kv-1", 1, estuaryv1.IPInstanceBound)[0]
	if addrOf(t, back).String() != "10.87.0.11" || back.Spec.Address.MAC != "0a:00:00:00:87:11" || back.Spec.Binding.NodeName != "node-z" {
		t.Fatalf("re-created kv-1 got %s MAC %q on %q", back.Name, back.Spec.Address.MAC, back.Spec.Binding.NodeName)
	}
	// Scale in to one: ordinal 1 goes, and its address with it.
	if err := unstructured.SetNestedField(set.Object, int64(1), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Update(bg(), set); err != nil {
		t.Fatal(err)
	}
	deletePod(t, podRef(ns, "kv-1"))
	waitRecordGone(t, "10.87.0.11")
	deletePod(t, podRef(ns, "kv-0"))
	waitInstances(t, ns, "kv-0", 1, estuaryv1.IPInstanceRetained)
	deleteObject(t, set)
	eventually(t, "kv-0's address released with the set", func() error {
		if n := len(instancesOf(t, ns, "kv-0")); n != 0 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
}

// A v1alpha1 Advanced StatefulSet's pods, and spec.reserveOrdinals: ordinal
// 1 reserved, so with two replicas the set has ordinals 0 and 2, and pod 2
// keeps its address while pod 1's is released.
func TestAdvancedStatefulSetReserveOrdinals(t *testing.T) {
	overlay(t, "ov-asts2", "10.87.1.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	set := newKruiseSet(t, ns, "ro", "v1alpha1", 2, nil)
	if err := unstructured.SetNestedSlice(set.Object, []any{int64(1)}, "spec", "reserveOrdinals"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Update(bg(), set); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, i := range []int{1, 2} {
		name := fmt.Sprintf("ro-%d", i)
		newPod(t, ns, name, controlledBy(set), onNetwork("ov-asts2"))
		ipi := waitInstances(t, ns, name, 1, estuaryv1.IPInstanceBound)[0]
		got[name] = ipi.Name
		if ipi.Spec.Binding.Owner.Kind != workload.KindKruiseStatefulSet || ipi.Spec.Address.MAC != derivedMAC(t, ipi) {
			t.Fatalf("%s: owner %+v MAC %q, want %s and the stable MAC", name, ipi.Spec.Binding.Owner, ipi.Spec.Address.MAC, workload.KindKruiseStatefulSet)
		}
		deletePod(t, podRef(ns, name))
	}
	waitRecordGone(t, got["ro-1"])
	waitInstances(t, ns, "ro-2", 1, estuaryv1.IPInstanceRetained)
}
