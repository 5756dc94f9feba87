package podipam

import (
	"fmt"
	"net/netip"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func TestPodGetsAddressAndReleasesIt(t *testing.T) {
	overlay(t, "ov-basic", "10.50.0.0/24")
	startManager(t)
	ns := newNamespace(t, nil)

	p := newPod(t, ns, "web")
	got := waitInstances(t, ns, "web", 1, estuaryv1.IPInstanceBound)[0]
	addr := addrOf(t, got)
	if !netip.MustParsePrefix("10.50.0.0/24").Contains(addr) || got.Spec.Address.IP != addr.String()+"/24" {
		t.Errorf("address %s not a /24 address of the overlay subnet", got.Spec.Address.IP)
	}
	if got.Spec.Binding.NodeName != "node-a" || got.Spec.Binding.PodUID != string(p.UID) || got.Spec.Subnet != "ov-basic-0" {
		t.Errorf("binding %+v subnet %s", got.Spec.Binding, got.Spec.Subnet)
	}
	if got.Spec.Address.NetID == nil || *got.Spec.Address.NetID != 7 {
		t.Errorf("netID %v, want the network's 7", got.Spec.Address.NetID)
	}
	waitUsed(t, "ov-basic-0", 1)

	deletePod(t, p)
	waitInstances(t, ns, "web", 0, "")
	waitUsed(t, "ov-basic-0", 0)
}

func TestFinishedPodReleasesAddress(t *testing.T) {
	overlay(t, "ov-done", "10.51.0.0/24")
	startManager(t)
	ns := newNamespace(t, nil)
	p := newPod(t, ns, "job")
	waitInstances(t, ns, "job", 1, estuaryv1.IPInstanceBound)

	p.Status.Phase = corev1.PodSucceeded
	if err := k8s.Status().Update(bg(), p); err != nil {
		t.Fatal(err)
	}
	waitInstances(t, ns, "job", 0, "")
	waitUsed(t, "ov-done-0", 0)
}

func TestUnscheduledAndHostNetworkPodsGetNothing(t *testing.T) {
	overlay(t, "ov-skip", "10.52.0.0/24")
	startManager(t)
	ns := newNamespace(t, nil)
	newPod(t, ns, "pending", onNode(""))
	newPod(t, ns, "host", func(p *corev1.Pod) { p.Spec.HostNetwork = true })
	newPod(t, ns, "marker")
	// The marker pod is served after the others were seen: once it has its
	// address, the skipped pods had their turn.
	waitInstances(t, ns, "marker", 1, estuaryv1.IPInstanceBound)
	for _, name := range []string{"pending", "host"} {
		if n := len(instancesOf(t, ns, name)); n != 0 {
			t.Errorf("pod %s got %d addresses", name, n)
		}
	}
}

func TestDualStackAndSelection(t *testing.T) {
	overlay(t, "ov-dual", "10.53.0.0/24", "fd00:53::/64")
	newNetwork(t, "under-sel", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, NodeSelector: map[string]string{"rack": "r1"}},
		map[string]estuaryv1.SubnetSpec{
			"under-sel-pub":  {Network: "under-sel", Range: estuaryv1.AddressRange{Version: 4, CIDR: "192.168.53.0/24", Gateway: "192.168.53.1"}},
			"under-sel-priv": {Network: "under-sel", Private: true, Range: estuaryv1.AddressRange{Version: 4, CIDR: "192.168.54.0/24"}},
		})
	// Underlay pods run on a node of the network's domain.
	newNode(t, "sel-r1", map[string]string{"rack": "r1"})
	startManager(t)
	plain := newNamespace(t, nil)
	viaNS := newNamespace(t, map[string]string{estuaryv1.AnnotationNetwork: "under-sel"})

	dual := waitInstances(t, plain, newPod(t, plain, "dual").Name, 2, estuaryv1.IPInstanceBound)
	fams := map[int32]bool{}
	for _, ipi := range dual {
		fams[ipi.Spec.Address.Version] = true
		if n := ipi.Annotations[estuaryv1.AnnotationAddresses]; n != "2" {
			t.Errorf("%s: %s=%q, want 2 (the pod's address count)", ipi.Name, estuaryv1.AnnotationAddresses, n)
		}
	}
	if !fams[4] || !fams[6] {
		t.Errorf("dual-stack overlay gave families %v", fams)
	}
	v6 := waitInstances(t, plain, newPod(t, plain, "v6", annotated(estuaryv1.AnnotationIPFamily, "IPv6")).Name, 1, estuaryv1.IPInstanceBound)
	if v6[0].Spec.Address.Version != 6 || v6[0].Name != estuaryv1.InstanceName(addrOf(t, v6[0])) {
		t.Errorf("IPv6 pod got %s named %s", v6[0].Spec.Address.IP, v6[0].Name)
	}

	fromNS := waitInstances(t, viaNS, newPod(t, viaNS, "u", onNode("sel-r1")).Name, 1, estuaryv1.IPInstanceBound)[0]
	if fromNS.Spec.Subnet != "under-sel-pub" || fromNS.Spec.Address.Gateway != "192.168.53.1" {
		t.Errorf("namespace default gave subnet %s gateway %s; want the public underlay subnet", fromNS.Spec.Subnet, fromNS.Spec.Address.Gateway)
	}
	named := waitInstances(t, viaNS, newPod(t, viaNS, "priv", onNode("sel-r1"), annotated(estuaryv1.AnnotationSubnet, "under-sel-priv")).Name, 1, estuaryv1.IPInstanceBound)[0]
	if named.Spec.Subnet != "under-sel-priv" {
		t.Errorf("named private subnet: got %s", named.Spec.Subnet)
	}
	back := waitInstances(t, viaNS, newPod(t, viaNS, "ov", annotated(estuaryv1.AnnotationNetwork, "ov-dual"), annotated(estuaryv1.AnnotationIPFamily, "IPv4")).Name, 1, estuaryv1.IPInstanceBound)[0]
	if back.Spec.Network != "ov-dual" {
		t.Errorf("pod annotation should beat the namespace's: got network %s", back.Spec.Network)
	}
}

func TestBadRequestIsReportedAndAllocatesNothing(t *testing.T) {
	overlay(t, "ov-bad", "10.55.0.0/24")
	startManager(t)
	ns := newNamespace(t, nil)
	cases := map[string]podOpt{
		"bad-family":   annotated(estuaryv1.AnnotationIPFamily, "IPv5"),
		"no-network":   annotated(estuaryv1.AnnotationNetwork, "does-not-exist"),
		"no-subnet":    annotated(estuaryv1.AnnotationSubnet, "nope"),
		"bad-name":     annotated(estuaryv1.AnnotationSubnet, "Not_A_Name"),
		"v6-on-v4only": annotated(estuaryv1.AnnotationIPFamily, "IPv6"),
	}
	for name, opt := range cases {
		newPod(t, ns, name, opt)
	}
	for name := range cases {
		eventually(t, "AllocationFailed event for "+name, func() error { return hasEvent(ns, name, "AllocationFailed") })
		if n := len(instancesOf(t, ns, name)); n != 0 {
			t.Errorf("pod %s with a bad request got %d addresses", name, n)
		}
	}
	waitUsed(t, "ov-bad-0", 0)
}

func TestExhaustedSubnetWaitsForAFreeAddress(t *testing.T) {
	overlay(t, "ov-small", "10.56.0.0/30") // two usable addresses
	startManager(t)
	ns := newNamespace(t, nil)
	a := newPod(t, ns, "a")
	newPod(t, ns, "b")
	waitInstances(t, ns, "a", 1, estuaryv1.IPInstanceBound)
	waitInstances(t, ns, "b", 1, estuaryv1.IPInstanceBound)
	newPod(t, ns, "c")
	eventually(t, "exhaustion reported on pod c", func() error { return hasEvent(ns, "c", "AllocationFailed") })
	if n := len(instancesOf(t, ns, "c")); n != 0 {
		t.Fatalf("third pod got an address from a full /30")
	}
	deletePod(t, a)
	waitInstances(t, ns, "c", 1, estuaryv1.IPInstanceBound)
}

func TestParallelPodsGetDistinctAddresses(t *testing.T) {
	overlay(t, "ov-par", "10.57.0.0/24")
	startManager(t)
	ns := newNamespace(t, nil)
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			newPod(t, ns, fmt.Sprintf("p%d", i))
		}()
	}
	wg.Wait()
	eventually(t, "every pod has an address", func() error {
		got := allInstances(t, ns)
		if len(got) != n {
			return fmt.Errorf("%d of %d", len(got), n)
		}
		return nil
	})
	requireUnique(t, allInstances(t, ns))
	waitUsed(t, "ov-par-0", n)
}

func TestStatefulSetKeepsAddressAcrossNodes(t *testing.T) {
	overlay(t, "ov-sts", "10.58.0.0/24")
	startManager(t)
	ns := newNamespace(t, nil)
	sts := newStatefulSet(t, ns, "db", 3, nil)
	var addrs [3]netip.Addr
	for i := range 3 {
		p := newPod(t, ns, fmt.Sprintf("db-%d", i), ownedBy(sts), onNode("node-a"))
		ipi := waitInstances(t, ns, p.Name, 1, estuaryv1.IPInstanceBound)[0]
		addrs[i] = addrOf(t, ipi)
		if o := ipi.Spec.Binding.Owner; o.Kind != "StatefulSet" || o.Name != "db" || ipi.Spec.Binding.StatefulOrdinal == nil || *ipi.Spec.Binding.StatefulOrdinal != int32(i) {
			t.Errorf("%s: owner %+v ordinal %v", p.Name, o, ipi.Spec.Binding.StatefulOrdinal)
		}
		deletePod(t, p)
		kept := waitInstances(t, ns, p.Name, 1, estuaryv1.IPInstanceRetained)[0]
		if addrOf(t, kept) != addrs[i] || kept.Spec.Binding.NodeName != "" || kept.Spec.Binding.PodUID != "" {
			t.Errorf("%s retained as %+v", p.Name, kept.Spec)
		}
		again := newPod(t, ns, p.Name, ownedBy(sts), onNode("node-b"))
		back := waitInstances(t, ns, p.Name, 1, estuaryv1.IPInstanceBound)[0]
		if addrOf(t, back) != addrs[i] || back.Spec.Binding.NodeName != "node-b" || back.Spec.Binding.PodUID != string(again.UID) {
			t.Errorf("%s on node-b got %s (node %s); want %s", p.Name, back.Spec.Address.IP, back.Spec.Binding.NodeName, addrs[i])
		}
	}
	waitUsed(t, "ov-sts-0", 3)

	// Scale 3 -> 1: the StatefulSet controller deletes db-2 and db-1; their
	// addresses go, db-0's stays.
	sts.Spec.Replicas = ptr.To[int32](1)
	if err := k8s.Update(bg(), sts); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"db-2", "db-1"} {
		deletePod(t, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		waitInstances(t, ns, name, 0, "")
	}
	waitUsed(t, "ov-sts-0", 1)
	if got := addrOf(t, waitInstances(t, ns, "db-0", 1, estuaryv1.IPInstanceBound)[0]); got != addrs[0] {
		t.Errorf("db-0 changed address to %s", got)
	}
}

func TestRetainedAddressesFollowTheStatefulSet(t *testing.T) {
	overlay(t, "ov-sts2", "10.59.0.0/24")
	startManager(t)
	ns := newNamespace(t, nil)

	// Retained while the pod is away; released when a scale-down drops it.
	sts := newStatefulSet(t, ns, "kv", 2, nil)
	p := newPod(t, ns, "kv-1", ownedBy(sts))
	waitInstances(t, ns, p.Name, 1, estuaryv1.IPInstanceBound)
	deletePod(t, p)
	waitInstances(t, ns, p.Name, 1, estuaryv1.IPInstanceRetained)
	sts.Spec.Replicas = ptr.To[int32](1)
	if err := k8s.Update(bg(), sts); err != nil {
		t.Fatal(err)
	}
	waitInstances(t, ns, p.Name, 0, "")

	// Released when the StatefulSet is deleted.
	p0 := newPod(t, ns, "kv-0", ownedBy(sts))
	waitInstances(t, ns, p0.Name, 1, estuaryv1.IPInstanceBound)
	deletePod(t, p0)
	waitInstances(t, ns, p0.Name, 1, estuaryv1.IPInstanceRetained)
	if err := k8s.Delete(bg(), sts); err != nil {
		t.Fatal(err)
	}
	waitInstances(t, ns, p0.Name, 0, "")

	// Not retained at all when the template says so.
	off := newStatefulSet(t, ns, "cache", 1, map[string]string{estuaryv1.AnnotationIPRetain: "false"})
	c := newPod(t, ns, "cache-0", ownedBy(off))
	waitInstances(t, ns, c.Name, 1, estuaryv1.IPInstanceBound)
	deletePod(t, c)
	waitInstances(t, ns, c.Name, 0, "")
	waitUsed(t, "ov-sts2-0", 0)
}

func newStatefulSet(t *testing.T, ns, name string, replicas int32, templateAnnotations map[string]string) *appsv1.StatefulSet {
	t.Helper()
	labels := map[string]string{"app": name}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: templateAnnotations},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
			},
		},
	}
	if err := k8s.Create(bg(), sts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k8s.Delete(bg(), &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
	})
	return sts
}

func allInstances(t *testing.T, ns string) []estuaryv1.IPInstance {
	t.Helper()
	var list estuaryv1.IPInstanceList
	if err := k8s.List(bg(), &list, client.MatchingLabels{estuaryv1.LabelNamespace: ns}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func requireUnique(t *testing.T, items []estuaryv1.IPInstance) {
	t.Helper()
	seen := map[netip.Addr]string{}
	for _, ipi := range items {
		a := addrOf(t, ipi)
		holder := ipi.Spec.Binding.Namespace + "/" + ipi.Spec.Binding.PodName
		if other, dup := seen[a]; dup {
			t.Errorf("address %s given to %s and %s", a, other, holder)
		}
		seen[a] = holder
	}
}

func hasEvent(ns, pod, reason string) error {
	var list eventsv1.EventList
	if err := k8s.List(bg(), &list, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, e := range list.Items {
		if e.Regarding.Name == pod && e.Reason == reason {
			return nil
		}
	}
	return fmt.Errorf("no %s event for pod %s", reason, pod)
}
