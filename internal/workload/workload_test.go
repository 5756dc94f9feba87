package workload

import (
	"context"
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func TestPoolOf(t *testing.T) {
	record := func(phase estuaryv1.IPInstancePhase, kind, name string) *estuaryv1.IPInstance {
		return &estuaryv1.IPInstance{
			Spec:   estuaryv1.IPInstanceSpec{Binding: estuaryv1.Binding{Namespace: "ns", PodName: "p", Owner: estuaryv1.OwnerReference{Kind: kind, Name: name}}},
			Status: estuaryv1.IPInstanceStatus{Phase: phase},
		}
	}
	for _, c := range []struct {
		name string
		ipi  *estuaryv1.IPInstance
		want string
	}{
		{"a Deployment's kept address", record(estuaryv1.IPInstanceRetained, KindDeployment, "api"), "ns/Deployment/api"},
		{"a StatefulSet's reserved address", record(estuaryv1.IPInstanceReserved, KindStatefulSet, "db"), "ns/StatefulSet/db"},
		{"a StatefulSet's kept address stays with the pod name", record(estuaryv1.IPInstanceRetained, KindStatefulSet, "db"), ""},
		{"an address in use", record(estuaryv1.IPInstanceBound, KindDeployment, "api"), ""},
		{"no owner", record(estuaryv1.IPInstanceReserved, "", ""), ""},
	} {
		ref, ok := PoolOf(c.ipi)
		if got := map[bool]string{true: ref.Key(), false: ""}[ok]; got != c.want {
			t.Errorf("%s: pool %q, want %q", c.name, got, c.want)
		}
	}
}

// cluster is a reader holding objs, standing in for the manager's cache.
func cluster(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := errors.Join(appsv1.AddToScheme(scheme), batchv1.AddToScheme(scheme), corev1.AddToScheme(scheme)); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
}

func meta(name, uid string, controller *metav1.OwnerReference) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uid)}
	if controller != nil {
		m.OwnerReferences = []metav1.OwnerReference{*controller}
	}
	return m
}

func controlledBy(apiVersion, kind, name, uid string) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: ptr.To(true)}
}

// Of follows only owners that exist with the UID the reference names, so a
// forged reference makes a pod its own workload, not the one it names.
func TestOfVerifiesOwners(t *testing.T) {
	api := &appsv1.Deployment{ObjectMeta: meta("api", "d-1", nil)}
	rs := &appsv1.ReplicaSet{ObjectMeta: meta("api-1", "rs-1", controlledBy("apps/v1", KindDeployment, "api", "d-1"))}
	forgedRS := &appsv1.ReplicaSet{ObjectMeta: meta("api-2", "rs-2", controlledBy("apps/v1", KindDeployment, "api", "d-forged"))}
	sts := &appsv1.StatefulSet{ObjectMeta: meta("db", "s-1", nil)}
	cron := &batchv1.CronJob{ObjectMeta: meta("nightly", "c-1", nil)}
	job := &batchv1.Job{ObjectMeta: meta("nightly-1", "j-1", controlledBy("batch/v1", KindCronJob, "nightly", "c-1"))}
	r := cluster(t, api, rs, forgedRS, sts, cron, job)
	self := "ns/Pod/p"
	for _, c := range []struct {
		name  string
		owner *metav1.OwnerReference
		want  string
	}{
		{"no controller", nil, self},
		{"a Deployment's ReplicaSet", controlledBy("apps/v1", KindReplicaSet, "api-1", "rs-1"), "ns/Deployment/api"},
		{"a ReplicaSet of another version", controlledBy("apps/v1beta2", KindReplicaSet, "api-1", "rs-1"), "ns/Deployment/api"},
		{"a ReplicaSet with a forged Deployment reference", controlledBy("apps/v1", KindReplicaSet, "api-2", "rs-2"), "ns/ReplicaSet/api-2"},
		{"a ReplicaSet named with a wrong UID", controlledBy("apps/v1", KindReplicaSet, "api-1", "forged"), self},
		{"a ReplicaSet that does not exist", controlledBy("apps/v1", KindReplicaSet, "api-9", "rs-9"), self},
		{"the Deployment named with a wrong UID", controlledBy("apps/v1", KindDeployment, "api", "forged"), self},
		{"a Deployment that does not exist", controlledBy("apps/v1", KindDeployment, "gone", "d-9"), self},
		{"the Deployment named with its UID", controlledBy("apps/v1", KindDeployment, "api", "d-1"), "ns/Deployment/api"},
		{"a StatefulSet", controlledBy("apps/v1", KindStatefulSet, "db", "s-1"), "ns/StatefulSet/db"},
		{"a StatefulSet named with a wrong UID", controlledBy("apps/v1", KindStatefulSet, "db", "forged"), self},
		{"a CronJob's Job", controlledBy("batch/v1", KindJob, "nightly-1", "j-1"), "ns/CronJob/nightly"},
		{"a kind of another group", controlledBy("example.com/v1", KindDeployment, "api", "d-1"), self},
		{"a custom controller", controlledBy("apps.kruise.io/v1alpha1", "CloneSet", "c", "x"), self},
		{"an apiVersion that does not parse", controlledBy("a/b/c", KindReplicaSet, "api-1", "rs-1"), self},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: meta("p", "p-1", c.owner)}
			got, err := Of(context.Background(), r, pod)
			if err != nil {
				t.Fatal(err)
			}
			if got.Key() != c.want {
				t.Errorf("workload %s, want %s", got.Key(), c.want)
			}
		})
	}
}

// A failure to read an owner is returned, never taken as the owner's
// absence.
func TestOfReturnsReadFailures(t *testing.T) {
	broken := interceptor.NewClient(cluster(t).(client.WithWatch), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return errors.New("cache not synced")
		},
	})
	pod := &corev1.Pod{ObjectMeta: meta("p", "p-1", controlledBy("apps/v1", KindReplicaSet, "api-1", "rs-1"))}
	got, err := Of(context.Background(), broken, pod)
	if err == nil || !strings.Contains(err.Error(), "ReplicaSet ns/api-1, controller of pod ns/p") {
		t.Fatalf("Of = %v, %v; want the read failure naming the ReplicaSet", got, err)
	}
}

func TestStatefulOrdinal(t *testing.T) {
	for _, c := range []struct {
		pod   string
		owner *metav1.OwnerReference
		set   string
		ord   int32
		ok    bool
	}{
		{"db-2", controlledBy("apps/v1", KindStatefulSet, "db", "s"), "db", 2, true},
		{"db-x", controlledBy("apps/v1", KindStatefulSet, "db", "s"), "", 0, false},
		{"web-0", controlledBy("apps/v1", KindStatefulSet, "db", "s"), "", 0, false},
		{"db-0", controlledBy("example.com/v1", KindStatefulSet, "db", "s"), "", 0, false},
		{"db-0", controlledBy("apps/v1", KindReplicaSet, "db", "s"), "", 0, false},
		{"db-0", nil, "", 0, false},
	} {
		set, ord, ok := StatefulOrdinal(&corev1.Pod{ObjectMeta: meta(c.pod, "p", c.owner)})
		if set != c.set || ord != c.ord || ok != c.ok {
			t.Errorf("StatefulOrdinal(%s, %v) = %q, %d, %v; want %q, %d, %v", c.pod, c.owner, set, ord, ok, c.set, c.ord, c.ok)
		}
	}
}

// optional is an object of an Optional kind (KubeVirt's, OpenKruise's) as
// the fake reader holds it.
func optional(apiVersion, kind, name, uid string, controller *metav1.OwnerReference) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetUID(types.UID(uid))
	if controller != nil {
		u.SetOwnerReferences([]metav1.OwnerReference{*controller})
	}
	return u
}

// A virt-launcher pod's workload is its VirtualMachine when its
// VirtualMachineInstance is the machine's, the instance when no machine
// controls it; an Advanced StatefulSet's pod is the set's, under a kind of
// its own; every owner followed is verified as for the apps kinds.
func TestOfFollowsKubeVirtAndKruise(t *testing.T) {
	vm := optional("kubevirt.io/v1", KindVirtualMachine, "db", "vm-1", nil)
	vmi := optional("kubevirt.io/v1", KindVirtualMachineInstance, "db", "vmi-1", controlledBy("kubevirt.io/v1", KindVirtualMachine, "db", "vm-1"))
	solo := optional("kubevirt.io/v1", KindVirtualMachineInstance, "solo", "vmi-2", nil)
	forged := optional("kubevirt.io/v1", KindVirtualMachineInstance, "forged", "vmi-3", controlledBy("kubevirt.io/v1", KindVirtualMachine, "db", "other"))
	asts := optional("apps.kruise.io/v1beta1", KindStatefulSet, "kv", "k-1", nil)
	r := cluster(t, vm, vmi, solo, forged, asts)
	for _, c := range []struct {
		name  string
		owner *metav1.OwnerReference
		want  string
	}{
		{"a VirtualMachine's instance", controlledBy("kubevirt.io/v1", KindVirtualMachineInstance, "db", "vmi-1"), "ns/VirtualMachine/db"},
		{"an instance of no machine", controlledBy("kubevirt.io/v1", KindVirtualMachineInstance, "solo", "vmi-2"), "ns/VirtualMachineInstance/solo"},
		{"an instance naming a machine with a wrong UID", controlledBy("kubevirt.io/v1", KindVirtualMachineInstance, "forged", "vmi-3"), "ns/VirtualMachineInstance/forged"},
		{"an instance named with a wrong UID", controlledBy("kubevirt.io/v1", KindVirtualMachineInstance, "db", "forged"), "ns/Pod/p"},
		{"an Advanced StatefulSet", controlledBy("apps.kruise.io/v1beta1", KindStatefulSet, "kv", "k-1"), "ns/StatefulSet.apps.kruise.io/kv"},
		{"an Advanced StatefulSet of v1alpha1", controlledBy("apps.kruise.io/v1alpha1", KindStatefulSet, "kv", "k-1"), "ns/StatefulSet.apps.kruise.io/kv"},
		{"an Advanced StatefulSet named with a wrong UID", controlledBy("apps.kruise.io/v1beta1", KindStatefulSet, "kv", "forged"), "ns/Pod/p"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Of(context.Background(), r, &corev1.Pod{ObjectMeta: meta("p", "p-1", c.owner)})
			if err != nil {
				t.Fatal(err)
			}
			if got.Key() != c.want {
				t.Errorf("workload %s, want %s", got.Key(), c.want)
			}
		})
	}
}

// A reference to a kind the API server does not serve (KubeVirt not
// installed) is not followed, and is no error.
func TestOfSkipsKindsNotServed(t *testing.T) {
	absent := interceptor.NewClient(cluster(t).(client.WithWatch), interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, _ client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
			gvk := obj.GetObjectKind().GroupVersionKind()
			return &apimeta.NoKindMatchError{GroupKind: gvk.GroupKind(), SearchedVersions: []string{gvk.Version}}
		},
	})
	pod := &corev1.Pod{ObjectMeta: meta("p", "p-1", controlledBy("kubevirt.io/v1", KindVirtualMachineInstance, "db", "vmi-1"))}
	got, err := Of(context.Background(), absent, pod)
	if err != nil || got.Key() != "ns/Pod/p" {
		t.Fatalf("Of = %v, %v; want the pod itself and no error", got.Key(), err)
	}
}

func TestStatefulController(t *testing.T) {
	for _, c := range []struct {
		owner *metav1.OwnerReference
		kind  string
		ok    bool
	}{
		{controlledBy("apps/v1", KindStatefulSet, "db", "s"), KindStatefulSet, true},
		{controlledBy("apps.kruise.io/v1beta1", KindStatefulSet, "db", "s"), KindKruiseStatefulSet, true},
		{controlledBy("apps.kruise.io/v1alpha1", KindStatefulSet, "db", "s"), KindKruiseStatefulSet, true},
		{controlledBy("apps.kruise.io/v1alpha1", "CloneSet", "db", "s"), "", false},
	} {
		kind, set, ord, ok := StatefulController(&corev1.Pod{ObjectMeta: meta("db-3", "p", c.owner)})
		if kind != c.kind || ok != c.ok || ok && (set != "db" || ord != 3) {
			t.Errorf("StatefulController(db-3, %v) = %q %q %d %v; want %q, db, 3, %v", c.owner, kind, set, ord, ok, c.kind, c.ok)
		}
	}
	if !IsStateful(KindKruiseStatefulSet) || !Pooled(estuaryv1.IPInstanceRetained, KindVirtualMachine) || Pooled(estuaryv1.IPInstanceRetained, KindKruiseStatefulSet) {
		t.Error("an Advanced StatefulSet's kept address must stay with its pod name, a virtual machine's in its pool")
	}
}
