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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// deployment creates a Deployment and a ReplicaSet it controls (no
// controller runs here, so neither makes pods) and returns a pod option that
// makes a pod the ReplicaSet's.
func deployment(t *testing.T, ns, name, rsSuffix string) podOpt {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(bg(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		d = &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
				},
			},
		}
		if err := k8s.Create(bg(), d); err != nil {
			t.Fatal(err)
		}
	}
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-" + rsSuffix, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template},
	}
	if err := k8s.Create(bg(), rs); err != nil {
		t.Fatal(err)
	}
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}
	}
}

func onNetwork(n string) podOpt { return annotated(estuaryv1.AnnotationNetwork, n) }

func addrsOf(t *testing.T, items []estuaryv1.IPInstance) []netip.Addr {
	t.Helper()
	var out []netip.Addr
	for _, ipi := range items {
		out = append(out, addrOf(t, ipi))
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// recordsOwnedBy lists, live, the records whose owner is kind/name in ns.
func recordsOwnedBy(t *testing.T, ns, kind, name string) []estuaryv1.IPInstance {
	t.Helper()
	var out []estuaryv1.IPInstance
	for _, ipi := range allInstances(t, ns) {
		if o := ipi.Spec.Binding.Owner; o.Kind == kind && o.Name == name {
			out = append(out, ipi)
		}
	}
	return out
}

// waitOwned waits until kind/name owns n records, all in phase.
func waitOwned(t *testing.T, ns, kind, name string, n int, phase estuaryv1.IPInstancePhase) []estuaryv1.IPInstance {
	t.Helper()
	return waitRecords(t, fmt.Sprintf("%d %s records of %s %s", n, phase, kind, name), n, phase,
		func() []estuaryv1.IPInstance { return recordsOwnedBy(t, ns, kind, name) })
}

// A Deployment whose pods retain: its pods' addresses are kept for the
// Deployment when they go (deleted with the Deployment), expiring after
// the default 24h, and the pods of the Deployment created again (a new
// ReplicaSet, new pod names, other nodes) get exactly the same addresses.
func TestDeploymentPodsHandAddressesToTheNextPods(t *testing.T) {
	overlay(t, "ov-keep", "10.90.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	rs := deployment(t, ns, "web", "a")
	var pods []*corev1.Pod
	for i := range 5 {
		pods = append(pods, newPod(t, ns, fmt.Sprintf("web-a-%d", i), rs, retain, onNetwork("ov-keep")))
	}
	first := waitOwned(t, ns, "Deployment", "web", 5, estuaryv1.IPInstanceBound)
	for _, ipi := range first {
		if ipi.Spec.Retention == nil || ipi.Spec.Retention.TTL == nil || ipi.Spec.Retention.TTL.Duration != 24*time.Hour {
			t.Errorf("%s: retention %+v, want ttl 24h", ipi.Name, ipi.Spec.Retention)
		}
	}
	for _, p := range pods {
		deletePod(t, p)
	}
	kept := waitOwned(t, ns, "Deployment", "web", 5, estuaryv1.IPInstanceRetained)
	for _, ipi := range kept {
		left := time.Until(ipi.Status.ExpiresAt.Time)
		if ipi.Status.ExpiresAt == nil || left < 23*time.Hour || left > 24*time.Hour {
			t.Errorf("%s: expiresAt %v, want about 24h from now", ipi.Name, ipi.Status.ExpiresAt)
		}
		if ipi.Spec.Binding.NodeName != "" || ipi.Spec.Binding.PodUID != "" {
			t.Errorf("%s: a kept record still names node %q pod uid %q", ipi.Name, ipi.Spec.Binding.NodeName, ipi.Spec.Binding.PodUID)
		}
	}
	// Other pods meanwhile never get the kept addresses.
	for i := range 5 {
		newPod(t, ns, fmt.Sprintf("other-%d", i), onNetwork("ov-keep"))
	}
	rs2 := deployment(t, ns, "web", "b")
	for i := range 5 {
		newPod(t, ns, fmt.Sprintf("web-b-%d", i), rs2, retain, onNetwork("ov-keep"), onNode("node-b"))
	}
	again := waitOwned(t, ns, "Deployment", "web", 5, estuaryv1.IPInstanceBound)
	if got, want := addrsOf(t, again), addrsOf(t, first); !slices.Equal(got, want) {
		t.Fatalf("the re-created Deployment got %v, want its old addresses %v", got, want)
	}
	for _, ipi := range again {
		if ipi.Spec.Binding.NodeName != "node-b" || ipi.Status.ExpiresAt != nil {
			t.Errorf("%s: node %q expiresAt %v after the hand-over", ipi.Name, ipi.Spec.Binding.NodeName, ipi.Status.ExpiresAt)
		}
	}
	eventually(t, "10 distinct addresses", func() error {
		if n := len(allInstances(t, ns)); n != 10 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
	requireUnique(t, allInstances(t, ns))
}

// Without ip-retain a Deployment's pod releases its address when it goes.
func TestDeploymentPodsReleaseByDefault(t *testing.T) {
	overlay(t, "ov-nokeep", "10.91.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	p := newPod(t, ns, "api-a-0", deployment(t, ns, "api", "a"), onNetwork("ov-nokeep"))
	got := waitInstances(t, ns, p.Name, 1, estuaryv1.IPInstanceBound)
	if o := got[0].Spec.Binding.Owner; o.Kind != "Deployment" || o.Name != "api" || got[0].Spec.Retention != nil {
		t.Fatalf("owner %+v retention %+v, want Deployment api without retention", o, got[0].Spec.Retention)
	}
	deletePod(t, p)
	waitOwned(t, ns, "Deployment", "api", 0, "")
	waitUsed(t, "ov-nokeep-0", 0)
}

// A kept address expires at status.expiresAt even when the manager that
// kept it is gone: the next manager reads the deadline from the record.
func TestRetentionExpiresAcrossManagerRestart(t *testing.T) {
	overlay(t, "ov-ttl", "10.92.0.0/24")
	ns := newNamespace(t, map[string]string{estuaryv1.AnnotationIPRetain: "true", estuaryv1.AnnotationIPRetainTTL: "6s"})
	stop := startManager(t)
	p := newPod(t, ns, "job-x", onNetwork("ov-ttl"))
	waitInstances(t, ns, p.Name, 1, estuaryv1.IPInstanceBound)
	deletePod(t, p)
	kept := waitOwned(t, ns, "Pod", "job-x", 1, estuaryv1.IPInstanceRetained)
	stop()
	deadline := kept[0].Status.ExpiresAt.Time
	if left := time.Until(deadline); left <= 0 || left > 6*time.Second {
		t.Fatalf("expiresAt %v is not within the 6s TTL", deadline)
	}
	startManager(t)
	waitOwned(t, ns, "Pod", "job-x", 0, "")
	if now := time.Now(); now.Before(deadline) {
		t.Fatalf("released at %v, before its deadline %v", now, deadline)
	}
	waitUsed(t, "ov-ttl-0", 0)
}

// ip-address: a pod gets the address it names on any node; another
// workload's pod asking for it is refused with an event naming the holder;
// a pod of the same workload waits, with an event, and gets it as soon as
// the holder is gone.
func TestExplicitAddress(t *testing.T) {
	overlay(t, "ov-fixed", "10.93.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	want := annotated(estuaryv1.AnnotationIPAddress, "10.93.0.77")
	rs := deployment(t, ns, "db", "a")
	first := newPod(t, ns, "db-a-0", rs, want, onNetwork("ov-fixed"), onNode("node-c"))
	got := waitInstances(t, ns, first.Name, 1, estuaryv1.IPInstanceBound)
	if a := addrOf(t, got[0]); a != netip.MustParseAddr("10.93.0.77") {
		t.Fatalf("got %s, want 10.93.0.77", a)
	}
	newPod(t, ns, "stranger", want, onNetwork("ov-fixed"))
	eventually(t, "the other workload's pod refused", func() error {
		return eventNote(ns, "stranger", ReasonAllocationFailed, "10.93.0.77 (pod "+ns+"/db-a-0)")
	})
	second := newPod(t, ns, "db-a-1", rs, want, onNetwork("ov-fixed"))
	eventually(t, "the same workload's pod waits", func() error {
		return eventNote(ns, second.Name, ReasonWaitingForAddress, "10.93.0.77 (pod "+ns+"/db-a-0)")
	})
	if n := len(instancesOf(t, ns, second.Name)); n != 0 {
		t.Fatalf("the waiting pod has %d records", n)
	}
	if err := k8s.Delete(bg(), podRef(ns, "stranger"), client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	deletePod(t, first)
	got = waitInstances(t, ns, second.Name, 1, estuaryv1.IPInstanceBound)
	if a := addrOf(t, got[0]); a != netip.MustParseAddr("10.93.0.77") {
		t.Fatalf("the waiting pod got %s, want 10.93.0.77", a)
	}
}

// ip-pool on a StatefulSet: ordinal i takes entry i, again after it moves
// to another node; mac-pool's entry i goes with it.
func TestStatefulSetPoolEntryPerOrdinal(t *testing.T) {
	overlay(t, "ov-pool", "10.94.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	sts := newStatefulSet(t, ns, "kv", 3, nil)
	pool := annotated(estuaryv1.AnnotationIPPool, "10.94.0.30,10.94.0.20,10.94.0.10")
	macs := annotated(estuaryv1.AnnotationMACPool, "0a:00:00:00:00:30,0a:00:00:00:00:20,0a:00:00:00:00:10")
	for _, i := range []int{2, 0, 1} {
		newPod(t, ns, fmt.Sprintf("kv-%d", i), ownedBy(sts), pool, macs, onNetwork("ov-pool"))
	}
	for i, want := range []string{"10.94.0.30", "10.94.0.20", "10.94.0.10"} {
		got := waitInstances(t, ns, fmt.Sprintf("kv-%d", i), 1, estuaryv1.IPInstanceBound)
		if a := addrOf(t, got[0]).String(); a != want {
			t.Errorf("kv-%d got %s, want entry %d %s", i, a, i, want)
		}
		if mac := got[0].Spec.Address.MAC; mac != fmt.Sprintf("0a:00:00:00:00:%d", 30-10*i) {
			t.Errorf("kv-%d got MAC %q, want mac-pool entry %d", i, mac, i)
		}
	}
	deletePod(t, podRef(ns, "kv-1"))
	waitInstances(t, ns, "kv-1", 1, estuaryv1.IPInstanceRetained)
	newPod(t, ns, "kv-1", ownedBy(sts), pool, macs, onNetwork("ov-pool"), onNode("node-z"))
	got := waitInstances(t, ns, "kv-1", 1, estuaryv1.IPInstanceBound)
	if a := addrOf(t, got[0]).String(); a != "10.94.0.20" || got[0].Spec.Binding.NodeName != "node-z" {
		t.Fatalf("moved kv-1 has %s on %q, want 10.94.0.20 on node-z", a, got[0].Spec.Binding.NodeName)
	}
}

// The manager refuses fixed-address annotations the webhook would have
// denied, naming the annotation, and records nothing.
func TestManagerRefusesBadFixedAnnotations(t *testing.T) {
	newNetwork(t, "ov-badfix", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, NetID: ptr.To[int64](7)},
		map[string]estuaryv1.SubnetSpec{"ov-badfix-v4": {Network: "ov-badfix", Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.95.0.0/24",
			ExcludeIPs: []estuaryv1.AddressOrRange{"10.95.0.100-10.95.0.110"}}}})
	ns := newNamespace(t, nil)
	startManager(t)
	for name, c := range map[string]struct{ key, value, note string }{
		"not-an-ip":  {estuaryv1.AnnotationIPAddress, "10.95.0.x", `"10.95.0.x" is not an IP address`},
		"outside":    {estuaryv1.AnnotationIPAddress, "10.99.0.5", "is outside every subnet of network"},
		"excluded":   {estuaryv1.AnnotationIPAddress, "10.95.0.105", "excluded range"},
		"two-v4":     {estuaryv1.AnnotationIPAddress, "10.95.0.5,10.95.0.6", "two IPv4 addresses"},
		"mixed-pool": {estuaryv1.AnnotationIPPool, "10.95.0.5,fd00::5", "mixes families"},
		"multicast":  {estuaryv1.AnnotationMACAddress, "01:00:5e:00:00:01", "multicast"},
		"bad-ttl":    {estuaryv1.AnnotationIPRetainTTL, "soon", "is not a positive duration"},
	} {
		newPod(t, ns, name, annotated(c.key, c.value), onNetwork("ov-badfix"))
		eventually(t, "refusal of "+name, func() error {
			return eventNote(ns, name, ReasonAllocationFailed, "metadata.annotations["+c.key+"] ")
		})
		if err := eventNote(ns, name, ReasonAllocationFailed, c.note); err != nil {
			t.Error(err)
		}
		if n := len(instancesOf(t, ns, name)); n != 0 {
			t.Errorf("%s: %d records for a refused pod", name, n)
		}
	}
}

// An address reserved for a workload (a Reserved IPInstance, as kubectl
// estuary reserve writes it) is never handed to anyone else, even when its
// subnet runs out; the workload's pod takes it, and it turns Reserved again
// when that pod goes.
func TestReservationServesOnlyItsWorkload(t *testing.T) {
	overlay(t, "ov-resv", "10.96.0.0/29") // .1 to .6
	ns := newNamespace(t, nil)
	startManager(t)
	reserve(t, ns, "ov-resv", "10.96.0.3/29", "Deployment", "vip")
	waitUsed(t, "ov-resv-0", 1)
	for i := range 6 {
		newPod(t, ns, fmt.Sprintf("filler-%d", i), onNetwork("ov-resv"))
	}
	eventually(t, "5 fillers served, one refused", func() error {
		if n := len(allInstances(t, ns)); n != 6 {
			return fmt.Errorf("%d records", n)
		}
		return nil
	})
	for _, ipi := range allInstances(t, ns) {
		if ipi.Name == "10.96.0.3" && ipi.Spec.Binding.Owner.Name != "vip" {
			t.Fatalf("the reserved address went to %+v", ipi.Spec.Binding)
		}
	}
	p := newPod(t, ns, "vip-a-0", deployment(t, ns, "vip", "a"), onNetwork("ov-resv"))
	got := waitInstances(t, ns, p.Name, 1, estuaryv1.IPInstanceBound)
	if a := addrOf(t, got[0]).String(); a != "10.96.0.3" || !got[0].Spec.Reserved {
		t.Fatalf("the workload's pod got %s (reserved %v), want its reservation 10.96.0.3", a, got[0].Spec.Reserved)
	}
	deletePod(t, p)
	waitOwned(t, ns, "Deployment", "vip", 1, estuaryv1.IPInstanceReserved)
	requireUnique(t, allInstances(t, ns))
}

// Addresses reserved for a StatefulSet go to its pods, and a pod re-created
// under its name gets the same one back.
func TestStatefulSetTakesItsReservations(t *testing.T) {
	overlay(t, "ov-stsresv", "10.98.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	for _, a := range []string{"10.98.0.200/24", "10.98.0.201/24"} {
		reserve(t, ns, "ov-stsresv", a, "StatefulSet", "rs")
	}
	waitUsed(t, "ov-stsresv-0", 2)
	sts := newStatefulSet(t, ns, "rs", 2, nil)
	for i := range 2 {
		newPod(t, ns, fmt.Sprintf("rs-%d", i), ownedBy(sts), onNetwork("ov-stsresv"))
	}
	got := map[string]string{}
	for i := range 2 {
		name := fmt.Sprintf("rs-%d", i)
		ipi := waitInstances(t, ns, name, 1, estuaryv1.IPInstanceBound)[0]
		got[name] = addrOf(t, ipi).String()
		if !ipi.Spec.Reserved {
			t.Errorf("%s got %s, not one of its reservations", name, got[name])
		}
	}
	deletePod(t, podRef(ns, "rs-1"))
	eventually(t, "rs-1's address Reserved again", func() error {
		ipi := &estuaryv1.IPInstance{}
		if err := k8s.Get(bg(), client.ObjectKey{Name: got["rs-1"]}, ipi); err != nil {
			return err
		}
		if ipi.Status.Phase != estuaryv1.IPInstanceReserved {
			return fmt.Errorf("%s is %s", ipi.Name, ipi.Status.Phase)
		}
		return nil
	})
	newPod(t, ns, "rs-1", ownedBy(sts), onNetwork("ov-stsresv"), onNode("node-y"))
	ipi := waitInstances(t, ns, "rs-1", 1, estuaryv1.IPInstanceBound)[0]
	if a := addrOf(t, ipi).String(); a != got["rs-1"] {
		t.Fatalf("re-created rs-1 got %s, want its reservation %s back", a, got["rs-1"])
	}
}

// reserve writes a Reserved record of prefix (address/length) in overlay
// network's subnet of its family (the first for IPv4, the second for IPv6),
// for workload kind/name of ns, as kubectl estuary reserve does, and
// removes it when the test ends.
func reserve(t *testing.T, ns, network, prefix, kind, name string) {
	t.Helper()
	addr := netip.MustParsePrefix(prefix).Addr()
	subnet, version := network+"-0", int32(4)
	if addr.Is6() { // the second subnet of a dual-stack overlay
		subnet, version = network+"-1", 6
	}
	resv := &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{Name: estuaryv1.InstanceName(addr), Labels: map[string]string{estuaryv1.LabelNamespace: ns, estuaryv1.LabelSubnet: subnet}},
		Spec: estuaryv1.IPInstanceSpec{Network: network, Subnet: subnet, Reserved: true,
			Address: estuaryv1.InstanceAddress{IP: prefix, Version: version},
			Binding: estuaryv1.Binding{Namespace: ns, Owner: estuaryv1.OwnerReference{Kind: kind, Name: name}}},
		Status: estuaryv1.IPInstanceStatus{Phase: estuaryv1.IPInstanceReserved},
	}
	if err := k8s.Create(bg(), resv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(bg(), resv) })
}
