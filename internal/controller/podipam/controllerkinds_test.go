package podipam

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/workload"
)

// replicationController creates ReplicationController ns/name (no
// controller runs here, so it makes no pods) and returns a pod option that
// makes a pod its.
func replicationController(t *testing.T, ns, name string) podOpt {
	t.Helper()
	labels := map[string]string{"app": name}
	rc := &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ReplicationControllerSpec{Selector: labels, Template: &corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{estuaryv1.AnnotationIPRetain: "true"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
		}},
	}
	if err := k8s.Create(bg(), rc); err != nil {
		t.Fatal(err)
	}
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: workload.KindReplicationController, Name: rc.Name, UID: rc.UID, Controller: ptr.To(true)}}
	}
}

// The VIP PaaS redeploy: an application's ReplicationController and its
// pods are deleted and a ReplicationController of the same name is
// created; its pods (other names) take the addresses the old ones kept.
// A ReplicationController of another name gets none of them.
func TestReplicationControllerRedeployKeepsAddresses(t *testing.T) {
	overlay(t, "ov-rc", "10.92.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	rc := replicationController(t, ns, "vip")
	var pods []*corev1.Pod
	for _, s := range []string{"abcde", "fghij"} {
		pods = append(pods, newPod(t, ns, "vip-"+s, rc, retain, onNetwork("ov-rc")))
	}
	first := addrsOf(t, waitOwned(t, ns, workload.KindReplicationController, "vip", 2, estuaryv1.IPInstanceBound))
	// A ReplicationController is deleted orphaning its pods unless told
	// otherwise, and no garbage collector runs here to finish that.
	old := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vip"}}
	if err := k8s.Delete(bg(), old, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "ReplicationController vip", old)
	for _, p := range pods {
		deletePod(t, p)
	}
	waitOwned(t, ns, workload.KindReplicationController, "vip", 2, estuaryv1.IPInstanceRetained)
	other := replicationController(t, ns, "vip-canary")
	for i := range 2 {
		newPod(t, ns, fmt.Sprintf("vip-canary-%d", i), other, retain, onNetwork("ov-rc"))
	}
	for _, a := range addrsOf(t, waitOwned(t, ns, workload.KindReplicationController, "vip-canary", 2, estuaryv1.IPInstanceBound)) {
		if slices.Contains(first, a) {
			t.Fatalf("ReplicationController vip-canary got %s, kept for vip", a)
		}
	}
	again := replicationController(t, ns, "vip")
	for _, s := range []string{"klmno", "pqrst"} {
		newPod(t, ns, "vip-"+s, again, retain, onNetwork("ov-rc"), onNode("node-b"))
	}
	if got := addrsOf(t, waitOwned(t, ns, workload.KindReplicationController, "vip", 2, estuaryv1.IPInstanceBound)); !slices.Equal(got, first) {
		t.Fatalf("the re-created ReplicationController's pods got %v, want the old addresses %v", got, first)
	}
}

// configure sets the configured workload kinds until the test ends.
func configure(t *testing.T, kinds ...workload.Kind) {
	t.Helper()
	prev := workload.Configured()
	workload.Configure(kinds)
	t.Cleanup(func() { workload.Configure(prev) })
}

var (
	testCloneSet = workload.Kind{Group: "test.estuary.io", Version: "v1", Kind: "CloneSet", Ordinal: true}
	testRollout  = workload.Kind{Group: "test.estuary.io", Version: "v1", Kind: "Rollout"}
)

// newCustom creates an object of kind k, deleted when the test ends.
func newCustom(t *testing.T, k workload.Kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{}}}
	u.SetGroupVersionKind(k.GVK())
	return createObject(t, u, ns, name)
}

// createObject creates u as ns/name, deleted when the test ends.
func createObject(t *testing.T, u *unstructured.Unstructured, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u.SetNamespace(ns)
	u.SetName(name)
	if err := k8s.Create(bg(), u); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(bg(), u) })
	return u
}

// customWorkload configures testCloneSet and testRollout, starts a manager
// (auditing every second: no watch tells it of a configured kind's
// deletion) with overlay network (one subnet of cidr), and creates an
// object of kind k named name in a new namespace.
func customWorkload(t *testing.T, network, cidr string, k workload.Kind, name string) (string, *unstructured.Unstructured) {
	t.Helper()
	configure(t, testCloneSet, testRollout)
	overlay(t, network, cidr)
	ns := newNamespace(t, nil)
	r, _ := startManagerWith(t, testManager{rc: cfg, audit: time.Second})
	eventually(t, "allocator rebuilt", func() error { return r.Ready() })
	return ns, newCustom(t, k, ns, name)
}

// A configured kind with ordinal names keeps each pod's addresses for the
// pod of the same name, as a StatefulSet does, until the owner is deleted:
// a pod gone after it releases at once, one kept before at the next audit.
func TestConfiguredKindKeepsByOrdinal(t *testing.T) {
	ns, set := customWorkload(t, "ov-cset", "10.92.1.0/24", testCloneSet, "cs")
	var first []netip.Addr
	for i := range 2 {
		newPod(t, ns, fmt.Sprintf("cs-%d", i), controlledBy(set), onNetwork("ov-cset"))
		ipi := waitInstances(t, ns, fmt.Sprintf("cs-%d", i), 1, estuaryv1.IPInstanceBound)[0]
		b := ipi.Spec.Binding
		if b.Owner.Kind != "CloneSet.test.estuary.io" || b.Owner.Name != "cs" || b.StatefulOrdinal == nil || *b.StatefulOrdinal != int32(i) {
			t.Fatalf("cs-%d: owner %+v ordinal %v; want CloneSet.test.estuary.io cs, ordinal %d", i, b.Owner, b.StatefulOrdinal, i)
		}
		first = append(first, addrOf(t, ipi))
	}
	deletePod(t, podRef(ns, "cs-1"))
	waitInstances(t, ns, "cs-1", 1, estuaryv1.IPInstanceRetained)
	newPod(t, ns, "cs-2", controlledBy(set), onNetwork("ov-cset"))
	if a := addrOf(t, waitInstances(t, ns, "cs-2", 1, estuaryv1.IPInstanceBound)[0]); a == first[1] {
		t.Fatalf("cs-2 took %s, kept for cs-1", a)
	}
	newPod(t, ns, "cs-1", controlledBy(set), onNetwork("ov-cset"), onNode("node-z"))
	if a := addrOf(t, waitInstances(t, ns, "cs-1", 1, estuaryv1.IPInstanceBound)[0]); a != first[1] {
		t.Fatalf("re-created cs-1 got %s, want its address %s", a, first[1])
	}
	deletePod(t, podRef(ns, "cs-0"))
	waitInstances(t, ns, "cs-0", 1, estuaryv1.IPInstanceRetained)
	deleteObject(t, set)
	deletePod(t, podRef(ns, "cs-1"))
	for _, pod := range []string{"cs-0", "cs-1"} {
		eventually(t, pod+"'s address released with its owner", func() error {
			if n := len(instancesOf(t, ns, pod)); n != 0 {
				return fmt.Errorf("%d records", n)
			}
			return nil
		})
	}
}

// A configured kind without ordinal names keeps its retaining pods'
// addresses for its next pods, as a Deployment does, its own or those of a
// ReplicaSet it controls.
func TestConfiguredKindKeepsForTheWorkload(t *testing.T) {
	ns, ro := customWorkload(t, "ov-rollout", "10.92.2.0/24", testRollout, "ro")
	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	p := newPod(t, ns, "ro-7d9f-x1", controlledBy(ro), retain, onNetwork("ov-rollout"))
	first := addrsOf(t, waitOwned(t, ns, "Rollout.test.estuary.io", "ro", 1, estuaryv1.IPInstanceBound))
	deletePod(t, p)
	waitOwned(t, ns, "Rollout.test.estuary.io", "ro", 1, estuaryv1.IPInstanceRetained)
	// The next pod comes through a ReplicaSet the Rollout controls, as an
	// Argo Rollout's do: its workload is still the Rollout.
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ro-5c4b", OwnerReferences: []metav1.OwnerReference{controllerRef(ro)}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ro"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "ro"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}},
	}
	if err := k8s.Create(bg(), rs); err != nil {
		t.Fatal(err)
	}
	newPod(t, ns, "ro-5c4b-y2", func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
	}, retain, onNetwork("ov-rollout"))
	if got := addrsOf(t, waitOwned(t, ns, "Rollout.test.estuary.io", "ro", 1, estuaryv1.IPInstanceBound)); !slices.Equal(got, first) {
		t.Fatalf("the Rollout's next pod (through its ReplicaSet) got %v, want %v", got, first)
	}
}

// A pod whose owner reference names a configured kind the API server does
// not serve is its own workload, with an OwnerUnverified event saying why.
func TestConfiguredKindNotServed(t *testing.T) {
	ghost := workload.Kind{Group: "absent.estuary.io", Version: "v1", Kind: "Ghost", Ordinal: true}
	configure(t, ghost)
	overlay(t, "ov-ghost", "10.92.3.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	ref := metav1.OwnerReference{APIVersion: "absent.estuary.io/v1", Kind: "Ghost", Name: "g", UID: "0b6c5b8e-0000-4000-8000-000000000001", Controller: ptr.To(true)}
	newPod(t, ns, "g-0", func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{ref} }, onNetwork("ov-ghost"))
	ipi := waitInstances(t, ns, "g-0", 1, estuaryv1.IPInstanceBound)[0]
	if o := ipi.Spec.Binding.Owner; o.Kind != workload.KindPod || ipi.Spec.Binding.StatefulOrdinal != nil {
		t.Fatalf("owner %+v ordinal %v; want the pod itself", o, ipi.Spec.Binding.StatefulOrdinal)
	}
	waitEvent(t, ns, "g-0", ReasonOwnerUnverified)
}
