package podipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// requireRefused waits for the AllocationFailed event of pod name saying
// each of want, and checks that nothing was recorded for it.
func requireRefused(t *testing.T, ns, name string, want ...string) {
	t.Helper()
	for _, w := range want {
		eventually(t, fmt.Sprintf("refusal of %s saying %q", name, w), func() error {
			return eventNote(ns, name, ReasonAllocationFailed, w)
		})
	}
	if n := len(instancesOf(t, ns, name)); n != 0 {
		t.Errorf("%s: %d records for a refused pod", name, n)
	}
}

// The manager refuses, as the webhook denies, an ip-retain-ttl above the
// maximum (the pod's or its namespace's) and Never on a network that does
// not allow it, and records nothing; the maximum itself is served.
func TestManagerRefusesRetentionBeyondTheBounds(t *testing.T) {
	overlay(t, "ov-bound", "10.100.0.0/24")
	ns := newNamespace(t, nil)
	long := newNamespace(t, map[string]string{estuaryv1.AnnotationIPRetainTTL: "200h"})
	startManager(t)
	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	ttl := func(v string) podOpt { return annotated(estuaryv1.AnnotationIPRetainTTL, v) }
	key := "metadata.annotations[" + estuaryv1.AnnotationIPRetainTTL + "] "
	newPod(t, ns, "too-long", retain, ttl("999999h"), onNetwork("ov-bound"))
	newPod(t, ns, "never", retain, ttl(estuaryv1.RetainNever), onNetwork("ov-bound"))
	newPod(t, long, "inherited", retain, onNetwork("ov-bound"))
	ok := newPod(t, ns, "max", retain, ttl("168h"), onNetwork("ov-bound"))
	requireRefused(t, ns, "too-long", `pod "`+ns+`/too-long"`, key+`"999999h" is longer than the cluster's maximum retention 168h0m0s`)
	requireRefused(t, ns, "never", key+`is Never, which network "ov-bound" allows only to pods of the namespaces its spec.retention.neverNamespaceSelector selects`)
	requireRefused(t, long, "inherited", `(inherited from namespace "`+long+`")`, `"200h" is longer`)
	waitInstances(t, ns, ok.Name, 1, estuaryv1.IPInstanceBound)
}

// Where the network's spec.retention.neverNamespaceSelector selects the
// namespace, a pod keeps its addresses with Never: kept without a deadline.
func TestNeverWhereTheNetworkAllowsIt(t *testing.T) {
	ns := newNamespace(t, nil)
	newNetwork(t, "ov-never", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, NetID: ptr.To[int64](7),
		Retention: &estuaryv1.NetworkRetention{NeverNamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{corev1.LabelMetadataName: ns}}}},
		map[string]estuaryv1.SubnetSpec{"ov-never-0": {Network: "ov-never", Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.101.0.0/24"}}})
	startManager(t)
	p := newPod(t, ns, "forever", annotated(estuaryv1.AnnotationIPRetain, "true"),
		annotated(estuaryv1.AnnotationIPRetainTTL, estuaryv1.RetainNever), onNetwork("ov-never"))
	waitInstances(t, ns, p.Name, 1, estuaryv1.IPInstanceBound)
	deletePod(t, p)
	kept := waitOwned(t, ns, "Pod", "forever", 1, estuaryv1.IPInstanceRetained)
	if kept[0].Status.ExpiresAt != nil {
		t.Fatalf("kept with Never, yet expires at %v", kept[0].Status.ExpiresAt)
	}
}

// The manager refuses the addresses a namespace may not claim, as the
// webhook denies them: a reserved address its subnet's
// reservedNamespaceSelector does not allow, a private subnet (named or by
// one of its addresses) whose namespaceSelector does not select the pod's
// namespace, and a Node's address.
func TestManagerRefusesUnclaimableAddresses(t *testing.T) {
	ns := newNamespace(t, nil)
	newNetwork(t, "ov-claim", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, NetID: ptr.To[int64](7)},
		map[string]estuaryv1.SubnetSpec{
			"ov-claim-pub": {Network: "ov-claim", Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.102.0.0/24",
				ReservedIPs: []estuaryv1.AddressOrRange{"10.102.0.10-10.102.0.19"}}},
			"ov-claim-priv": {Network: "ov-claim", Private: true, Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.102.1.0/24"},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "someone-else"}}},
		})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "claim-node"},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.102.0.200"}}}}
	if err := k8s.Create(bg(), node); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(bg(), node) })
	startManager(t)
	onNet := onNetwork("ov-claim")
	ip := func(a string) podOpt { return annotated(estuaryv1.AnnotationIPAddress, a) }
	newPod(t, ns, "reserved", ip("10.102.0.12"), onNet)
	newPod(t, ns, "private", ip("10.102.1.7"), onNet)
	newPod(t, ns, "named-private", annotated(estuaryv1.AnnotationSubnet, "ov-claim-priv"))
	newPod(t, ns, "node", ip("10.102.0.200"), onNet)
	ok := newPod(t, ns, "ordinary", ip("10.102.0.30"), onNet)
	requireRefused(t, ns, "reserved", `address 10.102.0.12 is reserved in subnet "ov-claim-pub" (spec.range.reservedIPs)`)
	requireRefused(t, ns, "private", `address 10.102.1.7 lies in private subnet "ov-claim-priv", whose spec.namespaceSelector does not select namespace "`+ns+`"`)
	requireRefused(t, ns, "named-private", `names private subnet "ov-claim-priv"`)
	requireRefused(t, ns, "node", `address 10.102.0.200 is the InternalIP of node "claim-node"`)
	waitInstances(t, ns, ok.Name, 1, estuaryv1.IPInstanceBound)
}

// A pod whose controller reference names a retaining Deployment, or its
// ReplicaSet, with a UID that is not theirs (the API server checks neither
// kind nor name) is its own workload: it gets a new address, never one the
// Deployment keeps, and the Deployment's next pod still gets its own back.
func TestForgedOwnerGetsNoKeptAddress(t *testing.T) {
	overlay(t, "ov-forge", "10.103.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	rs := deployment(t, ns, "web", "a")
	var pods []*corev1.Pod
	for i := range 2 {
		pods = append(pods, newPod(t, ns, fmt.Sprintf("web-a-%d", i), rs, retain, onNetwork("ov-forge")))
	}
	first := addrsOf(t, waitOwned(t, ns, "Deployment", "web", 2, estuaryv1.IPInstanceBound))
	for _, p := range pods {
		deletePod(t, p)
	}
	waitOwned(t, ns, "Deployment", "web", 2, estuaryv1.IPInstanceRetained)

	forge := func(kind, name string) podOpt {
		return func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name,
				UID: types.UID("not-its-uid"), Controller: ptr.To(true)}}
		}
	}
	for name, owner := range map[string]podOpt{"forged-rs": forge("ReplicaSet", "web-a"), "forged-deploy": forge("Deployment", "web")} {
		got := waitInstances(t, ns, newPod(t, ns, name, owner, retain, onNetwork("ov-forge")).Name, 1, estuaryv1.IPInstanceBound)[0]
		if a := addrOf(t, got); slices.Contains(first, a) {
			t.Errorf("%s got %s, an address Deployment web keeps", name, a)
		}
		if o := got.Spec.Binding.Owner; o.Kind != "Pod" || o.Name != name {
			t.Errorf("%s recorded for %s %s, want its own pod", name, o.Kind, o.Name)
		}
	}
	if n := len(recordsOwnedBy(t, ns, "Deployment", "web")); n != 2 {
		t.Fatalf("Deployment web owns %d records after the forged pods, want its 2 kept", n)
	}
	again := newPod(t, ns, "web-b-0", deployment(t, ns, "web", "b"), retain, onNetwork("ov-forge"))
	got := addrOf(t, waitInstances(t, ns, again.Name, 1, estuaryv1.IPInstanceBound)[0])
	if !slices.Contains(first, got) {
		t.Fatalf("the Deployment's next pod got %s, not one of its kept %v", got, first)
	}
	requireUnique(t, allInstances(t, ns))
}

// A pod of a real StatefulSet that is not its owner's (a forged UID) is
// its own workload too: a reservation for the StatefulSet does not go to
// it.
func TestForgedStatefulSetOwnerGetsNoReservation(t *testing.T) {
	overlay(t, "ov-forge-sts", "10.104.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	reserve(t, ns, "ov-forge-sts", "10.104.0.200/24", "StatefulSet", "db")
	waitUsed(t, "ov-forge-sts-0", 1)
	sts := newStatefulSet(t, ns, "db", 1, nil)
	forged := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: sts.Name, UID: "not-its-uid"}}
	got := waitInstances(t, ns, newPod(t, ns, "db-0", ownedBy(forged)).Name, 1, estuaryv1.IPInstanceBound)[0]
	if a := addrOf(t, got); a == netip.MustParseAddr("10.104.0.200") || got.Spec.Reserved {
		t.Fatalf("a pod with a forged StatefulSet reference got %s (reserved %v)", a, got.Spec.Reserved)
	}
	resv := &estuaryv1.IPInstance{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: "10.104.0.200"}, resv); err != nil || resv.Status.Phase != estuaryv1.IPInstanceReserved {
		t.Fatalf("the reservation is %v (%v), want still Reserved", resv.Status.Phase, err)
	}
}

// A pod named like a StatefulSet's pod whose reference names the
// StatefulSet with another UID (a forged one) does not get the addresses
// kept for that name: it is refused, they stay kept, and the StatefulSet's
// own pod of that name gets them back.
func TestForgedStatefulSetOwnerGetsNoKeptAddress(t *testing.T) {
	overlay(t, "ov-forge-kept", "10.105.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	sts := newStatefulSet(t, ns, "db", 1, nil)
	first := newPod(t, ns, "db-0", ownedBy(sts))
	kept := addrOf(t, waitInstances(t, ns, first.Name, 1, estuaryv1.IPInstanceBound)[0])
	deletePod(t, first)
	waitInstances(t, ns, "db-0", 1, estuaryv1.IPInstanceRetained)

	forged := newPod(t, ns, "db-0", ownedBy(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: sts.Name, UID: "not-its-uid"}}))
	eventually(t, "the forged pod refused", func() error {
		return eventNote(ns, forged.Name, ReasonAllocationFailed, "which does not exist with that UID")
	})
	if got := waitInstances(t, ns, "db-0", 1, estuaryv1.IPInstanceRetained); addrOf(t, got[0]) != kept || got[0].Spec.Binding.PodUID != "" {
		t.Fatalf("the kept record is now %s bound to %q, want %s still kept", addrOf(t, got[0]), got[0].Spec.Binding.PodUID, kept)
	}
	deletePod(t, forged)
	again := newPod(t, ns, "db-0", ownedBy(sts))
	got := waitInstances(t, ns, again.Name, 1, estuaryv1.IPInstanceBound)
	if addrOf(t, got[0]) != kept || got[0].Spec.Binding.PodUID != string(again.UID) {
		t.Fatalf("the StatefulSet's pod got %s bound to %q, want its kept %s", addrOf(t, got[0]), got[0].Spec.Binding.PodUID, kept)
	}
}

// A pod whose ReplicaSet the cache does not show yet (created a moment
// before the pod) is still its Deployment's: the owners are read again
// live before the pod is taken for its own workload, so the Deployment's
// next pod gets the addresses it keeps even when the cache lags.
func TestOwnerOfReadsLiveWhenTheCacheLags(t *testing.T) {
	ns := newNamespace(t, nil)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-x-0"}}
	deployment(t, ns, "web", "x")(pod)
	watching, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	lagging := interceptor.NewClient(watching, interceptor.Funcs{
		Get: func(_ context.Context, _ client.WithWatch, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "replicasets"}, key.Name)
		},
	})
	r := &planner{client: lagging, live: k8s}
	owner, err := r.ownerOf(bg(), pod)
	if err != nil {
		t.Fatal(err)
	}
	if owner.Kind != "Deployment" || owner.Name != "web" {
		t.Fatalf("owner %+v, want Deployment web read live", owner)
	}
	forged := pod.DeepCopy()
	forged.OwnerReferences[0].UID = "not-its-uid"
	if owner, err := r.ownerOf(bg(), forged); err != nil || owner.Kind != "Pod" {
		t.Fatalf("a forged reference: owner %+v (%v), want the pod itself", owner, err)
	}
}
