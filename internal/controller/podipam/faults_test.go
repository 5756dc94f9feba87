package podipam

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// loseAnswers wraps a client so that the first n IPInstance creates are
// stored by the API server but answered with a timeout, as when the
// connection drops after the write.
func loseAnswers(n int32) func(client.WithWatch) client.Client {
	var lost atomic.Int32
	return func(c client.WithWatch) client.Client {
		return interceptor.NewClient(c, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if err := c.Create(ctx, obj, opts...); err != nil {
					return err
				}
				if _, ok := obj.(*estuaryv1.IPInstance); ok && lost.Add(1) <= n {
					return apierrors.NewTimeoutError("the answer to this create was lost", 1)
				}
				return nil
			},
		})
	}
}

// TestLostCreateAnswerNeverGivesAPodTwoAddresses: creates that the API
// server stored but whose answers were lost leave each pod with exactly the
// address recorded for it. Before, the manager freed the address, gave the
// pod a second one, and the first stayed recorded for it.
func TestLostCreateAnswerNeverGivesAPodTwoAddresses(t *testing.T) {
	overlay(t, "ov-lost", "10.65.0.0/26")
	ns := newNamespace(t, nil)
	r, _ := startManagerWith(t, testManager{rc: cfg, client: loseAnswers(5)})
	eventually(t, "allocator rebuilt", func() error { return r.Ready() })
	for i := range 10 {
		newPod(t, ns, fmt.Sprintf("p%d", i))
	}
	for i := range 10 {
		waitInstances(t, ns, fmt.Sprintf("p%d", i), 1, estuaryv1.IPInstanceBound)
	}
	requireUnique(t, allInstances(t, ns))
	waitUsed(t, "ov-lost-0", 10)
	// Nothing more comes: every pod still has exactly one record.
	for i := range 10 {
		if n := len(instancesOf(t, ns, fmt.Sprintf("p%d", i))); n != 1 {
			t.Errorf("pod p%d has %d records", i, n)
		}
	}
}

// TestHalfRecordedDualStackIsCompleted: a dual-stack pod whose IPv4 record
// exists (saying the pod has 2 addresses) but whose IPv6 record was never
// written, as when a manager stops between the two creates, gets its IPv6
// address from the next manager. Before, the pod waited forever.
func TestHalfRecordedDualStackIsCompleted(t *testing.T) {
	overlay(t, "ov-half", "10.66.0.0/24", "fd00:66::/64")
	ns := newNamespace(t, nil)
	p := newPod(t, ns, "half")
	half := halfRecord(t, p, "ov-half", netip.MustParsePrefix("10.66.0.9/24"))
	startManager(t)
	got := waitInstances(t, ns, p.Name, 2, estuaryv1.IPInstanceBound)
	var families []int32
	for _, ipi := range got {
		families = append(families, ipi.Spec.Address.Version)
		if ipi.Spec.Address.Version == 4 && ipi.Name != half.Name {
			t.Errorf("the IPv4 address changed: %s, want %s", ipi.Spec.Address.IP, half.Spec.Address.IP)
		}
		if n, _ := strconv.Atoi(ipi.Annotations[estuaryv1.AnnotationAddresses]); n != 2 {
			t.Errorf("record %s says the pod has %q addresses, want 2", ipi.Name, ipi.Annotations[estuaryv1.AnnotationAddresses])
		}
	}
	if len(families) != 2 || families[0] == families[1] {
		t.Errorf("families %v, want one IPv4 and one IPv6", families)
	}
}

// halfRecord writes the IPv4 record of dual-stack pod p on network's first
// subnet, saying the pod has 2 addresses, as a manager stopped between the
// two creates leaves it; opts change the record before it is written.
func halfRecord(t *testing.T, p *corev1.Pod, network string, v4 netip.Prefix, opts ...func(*estuaryv1.IPInstance)) *estuaryv1.IPInstance {
	t.Helper()
	subnet := network + "-0"
	half := &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{Name: estuaryv1.InstanceName(v4.Addr()),
			Labels:      map[string]string{estuaryv1.LabelNamespace: p.Namespace, estuaryv1.LabelPod: p.Name, estuaryv1.LabelSubnet: subnet, estuaryv1.LabelNode: p.Spec.NodeName},
			Annotations: map[string]string{estuaryv1.AnnotationAddresses: "2"}},
		Spec: estuaryv1.IPInstanceSpec{Network: network, Subnet: subnet,
			Address: estuaryv1.InstanceAddress{IP: v4.String(), Version: 4},
			Binding: estuaryv1.Binding{Namespace: p.Namespace, PodName: p.Name, PodUID: string(p.UID), NodeName: p.Spec.NodeName,
				Owner: estuaryv1.OwnerReference{Kind: "Pod", Name: p.Name, UID: string(p.UID)}}},
		Status: estuaryv1.IPInstanceStatus{Phase: estuaryv1.IPInstanceBound},
	}
	for _, o := range opts {
		o(half)
	}
	if err := k8s.Create(bg(), half); err != nil {
		t.Fatal(err)
	}
	return half
}

// TestHalfRecordedFixedPodGetsItsNamedAddresses: a dual-stack pod that
// names both its addresses and was stopped half-recorded gets the IPv6
// address it names, not any free one. Two such pods naming the same IPv6
// address: one gets it, the other is refused with an event naming the
// address and is given no other.
func TestHalfRecordedFixedPodGetsItsNamedAddresses(t *testing.T) {
	overlay(t, "ov-named", "10.67.0.0/24", "fd00:67::/64")
	ns := newNamespace(t, nil)
	named := netip.MustParseAddr("fd00:67::9")
	a := newPod(t, ns, "a", onNetwork("ov-named"), annotated(estuaryv1.AnnotationIPAddress, "10.67.0.9,"+named.String()))
	b := newPod(t, ns, "b", onNetwork("ov-named"), annotated(estuaryv1.AnnotationIPAddress, "10.67.0.10,"+named.String()))
	halfRecord(t, a, "ov-named", netip.MustParsePrefix("10.67.0.9/24"))
	halfRecord(t, b, "ov-named", netip.MustParsePrefix("10.67.0.10/24"))
	startManager(t)
	var winner, loser *corev1.Pod
	eventually(t, "one pod completed with "+named.String(), func() error {
		for _, p := range []*corev1.Pod{a, b} {
			if len(instancesOf(t, ns, p.Name)) == 2 {
				winner = p
				return nil
			}
		}
		return fmt.Errorf("neither pod has 2 records")
	})
	loser = b
	if winner == b {
		loser = a
	}
	if got := addrsOf(t, instancesOf(t, ns, winner.Name)); got[1] != named {
		t.Errorf("pod %s completed with %v, want the IPv6 address it names, %s", winner.Name, got, named)
	}
	eventually(t, "pod "+loser.Name+" refused", func() error {
		return eventNote(ns, loser.Name, ReasonAllocationFailed, named.String())
	})
	if n := len(instancesOf(t, ns, loser.Name)); n != 1 {
		t.Errorf("the refused pod %s has %d records, want only its IPv4 one", loser.Name, n)
	}
}

// TestHalfRecordedFixedPodTakesItsKeptAddress: a pod of a Deployment that
// names two addresses reserved for the Deployment, stopped after the first
// was handed over, is completed by handing it the second, still in the
// Deployment's pool: not left waiting, not given another.
func TestHalfRecordedFixedPodTakesItsKeptAddress(t *testing.T) {
	overlay(t, "ov-kept", "10.68.0.0/24", "fd00:68::/64")
	ns := newNamespace(t, nil)
	named := netip.MustParseAddr("fd00:68::9")
	rs := deployment(t, ns, "db", "a")
	p := newPod(t, ns, "db-a-0", rs, onNetwork("ov-kept"), annotated(estuaryv1.AnnotationIPAddress, "10.68.0.9,"+named.String()))
	reserve(t, ns, "ov-kept", named.String()+"/64", "Deployment", "db")
	halfRecord(t, p, "ov-kept", netip.MustParsePrefix("10.68.0.9/24"), func(ipi *estuaryv1.IPInstance) {
		ipi.Spec.Reserved = true
		ipi.Spec.Binding.Owner = estuaryv1.OwnerReference{Kind: "Deployment", Name: "db"}
	})
	startManager(t)
	got := addrsOf(t, waitInstances(t, ns, p.Name, 2, estuaryv1.IPInstanceBound))
	if got[1] != named {
		t.Errorf("pod %s completed with %v, want the reserved IPv6 address it names, %s", p.Name, got, named)
	}
}

// TestAuditReleasesRecordsNoEventExplains: a record written by hand for a
// pod that does not exist (as another manager, or a lost event, would leave
// it) is adopted and released by the audit within its interval, and its
// address counted free again.
func TestAuditReleasesRecordsNoEventExplains(t *testing.T) {
	overlay(t, "ov-audit", "10.67.0.0/24")
	ns := newNamespace(t, nil)
	r, _ := startManagerWith(t, testManager{rc: cfg, audit: 500 * time.Millisecond})
	eventually(t, "allocator rebuilt", func() error { return r.Ready() })
	live := waitInstances(t, ns, newPod(t, ns, "live").Name, 1, estuaryv1.IPInstanceBound)[0]
	ghost := netip.MustParsePrefix("10.67.0.200/24")
	rec := &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{Name: estuaryv1.InstanceName(ghost.Addr()),
			Labels: map[string]string{estuaryv1.LabelNamespace: ns, estuaryv1.LabelPod: "ghost", estuaryv1.LabelSubnet: "ov-audit-0"}},
		Spec: estuaryv1.IPInstanceSpec{Network: "ov-audit", Subnet: "ov-audit-0",
			Address: estuaryv1.InstanceAddress{IP: ghost.String(), Version: 4},
			Binding: estuaryv1.Binding{Namespace: ns, PodName: "ghost", PodUID: "gone-uid", NodeName: "node-a",
				Owner: estuaryv1.OwnerReference{Kind: "Pod", Name: "ghost", UID: "gone-uid"}}},
		Status: estuaryv1.IPInstanceStatus{Phase: estuaryv1.IPInstanceBound},
	}
	if err := k8s.Create(bg(), rec); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the audit's release of the record of a pod that does not exist", rec)
	waitUsed(t, "ov-audit-0", 1)
	if got := waitInstances(t, ns, "live", 1, estuaryv1.IPInstanceBound)[0]; got.Name != live.Name {
		t.Errorf("the live pod's address changed from %s to %s", live.Name, got.Name)
	}
}

// TestSplitBrainEndsWithOneAddressPerPod: two managers that both see every
// pod serve them at once, so pods may get one record from each, and each
// pod's node sets up what it sees first (the daemon's own wait, package
// ipwait) and reports it. Once one manager stops, the other's audit adopts
// the records it did not write, and every pod is left with one recorded
// address, the one its node set up, in no other pod.
func TestSplitBrainEndsWithOneAddressPerPod(t *testing.T) {
	overlay(t, "ov-brain", "10.68.0.0/25")
	ns := newNamespace(t, nil)
	survivor, _ := startManagerWith(t, testManager{rc: cfg, audit: 500 * time.Millisecond})
	_, stopOther := startManagerWith(t, testManager{rc: cfg, audit: 500 * time.Millisecond})
	eventually(t, "allocator rebuilt", func() error { return survivor.Ready() })
	nodes := startNodes(t, "node-a")
	nodes.addAll(t, 20, 30*time.Second, func(i int) *corev1.Pod { return newPod(t, ns, fmt.Sprintf("b%d", i)) })
	stopOther()
	eventually(t, "one address per pod after the split brain", func() error {
		for i := range 20 {
			if n := len(instancesOf(t, ns, fmt.Sprintf("b%d", i))); n != 1 {
				return fmt.Errorf("b%d has %d addresses", i, n)
			}
		}
		return nil
	})
	requireUnique(t, allInstances(t, ns))
	nodes.check(t, ns)
}

// TestStatefulSetOrphanDeleteAndRecreateKeepsAddresses: a StatefulSet
// deleted with its pods orphaned and created again (same name, new UID)
// adopts the pods; their addresses follow the new StatefulSet, and a pod it
// replaces (a rolling update) gets its address back. Before, the addresses
// stayed with the old UID and were released at the first replacement.
func TestStatefulSetOrphanDeleteAndRecreateKeepsAddresses(t *testing.T) {
	overlay(t, "ov-orphan", "10.69.0.0/24")
	startManager(t)
	ns := newNamespace(t, nil)
	old := newStatefulSet(t, ns, "db", 2, nil)
	var pods [2]*corev1.Pod
	var addrs [2]netip.Addr
	for i := range 2 {
		pods[i] = newPod(t, ns, fmt.Sprintf("db-%d", i), ownedBy(old))
		addrs[i] = addrOf(t, waitInstances(t, ns, pods[i].Name, 1, estuaryv1.IPInstanceBound)[0])
	}

	// kubectl delete sts db --cascade=orphan, then what the garbage
	// collector does (no kube-controller-manager runs here): the pods lose
	// their owner, then the StatefulSet its finalizer.
	if err := k8s.Delete(bg(), old, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		setController(t, p, nil)
	}
	current := &appsv1.StatefulSet{}
	if err := k8s.Get(bg(), client.ObjectKeyFromObject(old), current); err != nil {
		t.Fatal(err)
	}
	current.Finalizers = nil
	if err := k8s.Update(bg(), current); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "the old StatefulSet", old)

	// Created again; its controller adopts the pods.
	again := newStatefulSet(t, ns, "db", 2, nil)
	for _, p := range pods {
		setController(t, p, again)
	}
	eventually(t, "the records follow the new StatefulSet", func() error {
		for _, p := range pods {
			got := instancesOf(t, ns, p.Name)
			if len(got) != 1 || got[0].Spec.Binding.Owner.UID != string(again.UID) {
				return fmt.Errorf("%s: %d records, want 1 owned by uid %s", p.Name, len(got), again.UID)
			}
		}
		return nil
	})

	// A rolling update replaces db-0: it keeps its address.
	deletePod(t, pods[0])
	if got := addrOf(t, waitInstances(t, ns, "db-0", 1, estuaryv1.IPInstanceRetained)[0]); got != addrs[0] {
		t.Fatalf("db-0 retained %s, want %s", got, addrs[0])
	}
	newPod(t, ns, "db-0", ownedBy(again), onNode("node-b"))
	if got := addrOf(t, waitInstances(t, ns, "db-0", 1, estuaryv1.IPInstanceBound)[0]); got != addrs[0] {
		t.Errorf("the replaced db-0 got %s, want its address %s", got, addrs[0])
	}
	waitUsed(t, "ov-orphan-0", 2)
}

// setController makes sts (nil: nobody) the controller of the pod, as the
// garbage collector and the StatefulSet controller do.
func setController(t *testing.T, p *corev1.Pod, sts *appsv1.StatefulSet) {
	t.Helper()
	cur := &corev1.Pod{}
	if err := k8s.Get(bg(), client.ObjectKeyFromObject(p), cur); err != nil {
		t.Fatal(err)
	}
	cur.OwnerReferences = nil
	if sts != nil {
		ownedBy(sts)(cur)
	}
	if err := k8s.Update(bg(), cur); err != nil {
		t.Fatal(err)
	}
}
