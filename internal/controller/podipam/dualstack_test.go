package podipam

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// Fixed addresses with both families: what a StatefulSet's or a retaining
// Deployment's pod keeps comes back whole, a kept address of one family
// never makes a pod that asks for two come up with one, and ip-address
// names one address per family.

// setUpOn runs pod's ADD on its node (the daemon's own wait for every
// address the records promise) and returns what the node set up, sorted.
func setUpOn(t *testing.T, n *nodes, pod *corev1.Pod) []netip.Addr {
	t.Helper()
	got := n.add(t, pod)
	got = slices.Clone(got)
	slices.SortFunc(got, netip.Addr.Compare)
	return got
}

// wantDual fails the test unless got is one IPv4 and one IPv6 address.
func wantDual(t *testing.T, what string, got []netip.Addr) {
	t.Helper()
	if len(got) != 2 || !got[0].Is4() || !got[1].Is6() {
		t.Fatalf("%s: the node set up %v, want one IPv4 and one IPv6 address", what, got)
	}
}

// wantCount fails the test unless every record says the pod has n
// addresses.
func wantCount(t *testing.T, items []estuaryv1.IPInstance, n int) {
	t.Helper()
	for _, ipi := range items {
		if got := countOf(&ipi); got != n {
			t.Errorf("record %s says its pod has %d addresses, want %d", ipi.Name, got, n)
		}
	}
}

func ipFamily(f string) podOpt { return annotated(estuaryv1.AnnotationIPFamily, f) }

// A dual-stack StatefulSet pod deleted and created again, on another node,
// gets the same IPv4 and IPv6 addresses.
func TestDualStackStatefulSetPodKeepsBothAddresses(t *testing.T) {
	overlay(t, "ov-ds-sts", "10.110.0.0/24", "fd00:110::/64")
	ns := newNamespace(t, nil)
	startManager(t)
	n := startNodes(t, "node-a", "node-b")
	sts := newStatefulSet(t, ns, "db", 1, nil)
	first := setUpOn(t, n, newPod(t, ns, "db-0", ownedBy(sts), onNetwork("ov-ds-sts"), onNode("node-a")))
	wantDual(t, "db-0", first)
	deletePod(t, podRef(ns, "db-0"))
	if kept := addrsOf(t, waitInstances(t, ns, "db-0", 2, estuaryv1.IPInstanceRetained)); !slices.Equal(kept, first) {
		t.Fatalf("kept %v, want %v", kept, first)
	}
	again := setUpOn(t, n, newPod(t, ns, "db-0", ownedBy(sts), onNetwork("ov-ds-sts"), onNode("node-b")))
	if !slices.Equal(again, first) {
		t.Fatalf("db-0 re-created on node-b: the node set up %v, want %v", again, first)
	}
	wantCount(t, waitInstances(t, ns, "db-0", 2, estuaryv1.IPInstanceBound), 2)
	n.check(t, ns)
}

// A retaining Deployment's dual-stack pod leaves both addresses to the
// Deployment, and the Deployment's next pod gets both back.
func TestDualStackRetainingDeploymentPodKeepsBothAddresses(t *testing.T) {
	overlay(t, "ov-ds-dep", "10.111.0.0/24", "fd00:111::/64")
	ns := newNamespace(t, nil)
	startManager(t)
	n := startNodes(t, "node-a", "node-b")
	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	old := newPod(t, ns, "web-a-0", deployment(t, ns, "web", "a"), retain, onNetwork("ov-ds-dep"), onNode("node-a"))
	first := setUpOn(t, n, old)
	wantDual(t, "web-a-0", first)
	deletePod(t, old)
	if kept := addrsOf(t, waitOwned(t, ns, "Deployment", "web", 2, estuaryv1.IPInstanceRetained)); !slices.Equal(kept, first) {
		t.Fatalf("the Deployment keeps %v, want %v", kept, first)
	}
	next := newPod(t, ns, "web-b-0", deployment(t, ns, "web", "b"), retain, onNetwork("ov-ds-dep"), onNode("node-b"))
	if again := setUpOn(t, n, next); !slices.Equal(again, first) {
		t.Fatalf("the Deployment's next pod: the node set up %v, want %v", again, first)
	}
	wantCount(t, waitInstances(t, ns, next.Name, 2, estuaryv1.IPInstanceBound), 2)
	n.check(t, ns)
}

// ip-address with one address per family gives the pod exactly those, and
// a StatefulSet's pod naming them gets them back when re-created. Two
// addresses of one family, or an address of a family the network has no
// subnet for, are refused with an event naming the annotation and the
// pod, and nothing is recorded.
func TestIPAddressOnePerFamily(t *testing.T) {
	overlay(t, "ov-ds-fixed", "10.112.0.0/24", "fd00:112::/64")
	overlay(t, "ov-ds-fixed4", "10.113.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	n := startNodes(t, "node-a", "node-b")
	want := []netip.Addr{netip.MustParseAddr("10.112.0.5"), netip.MustParseAddr("fd00:112::5")}
	named := annotated(estuaryv1.AnnotationIPAddress, "10.112.0.5,fd00:112::5")
	if got := setUpOn(t, n, newPod(t, ns, "one", named, onNetwork("ov-ds-fixed"))); !slices.Equal(got, want) {
		t.Fatalf("the node set up %v, want %v", got, want)
	}
	deletePod(t, podRef(ns, "one"))
	waitInstances(t, ns, "one", 0, "")

	sts := newStatefulSet(t, ns, "kv", 1, nil)
	named6 := annotated(estuaryv1.AnnotationIPAddress, "10.112.0.6,fd00:112::6")
	want6 := []netip.Addr{netip.MustParseAddr("10.112.0.6"), netip.MustParseAddr("fd00:112::6")}
	if got := setUpOn(t, n, newPod(t, ns, "kv-0", ownedBy(sts), named6, onNetwork("ov-ds-fixed"), onNode("node-a"))); !slices.Equal(got, want6) {
		t.Fatalf("kv-0: the node set up %v, want %v", got, want6)
	}
	deletePod(t, podRef(ns, "kv-0"))
	waitInstances(t, ns, "kv-0", 2, estuaryv1.IPInstanceRetained)
	if got := setUpOn(t, n, newPod(t, ns, "kv-0", ownedBy(sts), named6, onNetwork("ov-ds-fixed"), onNode("node-b"))); !slices.Equal(got, want6) {
		t.Fatalf("kv-0 re-created: the node set up %v, want %v", got, want6)
	}

	for name, c := range map[string]struct{ network, value, note string }{
		"two-v4":    {"ov-ds-fixed", "10.112.0.7,10.112.0.8", "two IPv4 addresses"},
		"two-v6":    {"ov-ds-fixed", "fd00:112::7,fd00:112::8", "two IPv6 addresses"},
		"no-v6-net": {"ov-ds-fixed4", "10.113.0.7,fd00:113::7", "fd00:113::7"},
	} {
		newPod(t, ns, name, annotated(estuaryv1.AnnotationIPAddress, c.value), onNetwork(c.network))
		eventually(t, "refusal of "+name, func() error {
			return eventNotes(ns, name, ReasonAllocationFailed, "metadata.annotations["+estuaryv1.AnnotationIPAddress+"]", ns+"/"+name, c.note)
		})
		if got := instancesOf(t, ns, name); len(got) != 0 {
			t.Errorf("%s: refused pod has records %v", name, addrsOf(t, got))
		}
	}
	n.check(t, ns)
}

// The defect: a StatefulSet pod whose kept address has one family (kept
// while the pod asked for IPv4 only) and that is re-created asking for
// DualStack must come up with both families, its kept IPv4 address and a
// new IPv6 one, and keep both from then on. Before, the kept record said
// the pod had one address: the node set up IPv4 alone and the IPv6
// address was never allocated.
func TestStatefulSetPodKeptWithOneFamilyAskingForTwo(t *testing.T) {
	overlay(t, "ov-ds-grow", "10.114.0.0/24", "fd00:114::/64")
	ns := newNamespace(t, nil)
	startManager(t)
	n := startNodes(t, "node-a", "node-b")
	sts := newStatefulSet(t, ns, "db", 1, nil)
	v4 := setUpOn(t, n, newPod(t, ns, "db-0", ownedBy(sts), ipFamily(estuaryv1.IPFamilyIPv4), onNetwork("ov-ds-grow")))
	if len(v4) != 1 || !v4[0].Is4() {
		t.Fatalf("db-0 asking IPv4: the node set up %v", v4)
	}
	deletePod(t, podRef(ns, "db-0"))
	waitInstances(t, ns, "db-0", 1, estuaryv1.IPInstanceRetained)

	dual := setUpOn(t, n, newPod(t, ns, "db-0", ownedBy(sts), ipFamily(estuaryv1.IPFamilyDualStack), onNetwork("ov-ds-grow"), onNode("node-b")))
	wantDual(t, "db-0 asking DualStack", dual)
	if dual[0] != v4[0] {
		t.Errorf("db-0 asking DualStack got IPv4 %s, want its kept %s", dual[0], v4[0])
	}
	wantCount(t, waitInstances(t, ns, "db-0", 2, estuaryv1.IPInstanceBound), 2)
	n.check(t, ns)

	deletePod(t, podRef(ns, "db-0"))
	waitInstances(t, ns, "db-0", 2, estuaryv1.IPInstanceRetained)
	if again := setUpOn(t, n, newPod(t, ns, "db-0", ownedBy(sts), ipFamily(estuaryv1.IPFamilyDualStack), onNetwork("ov-ds-grow"))); !slices.Equal(again, dual) {
		t.Fatalf("db-0 re-created again: the node set up %v, want %v", again, dual)
	}
	n.check(t, ns)
}

// The same when the network gained its IPv6 subnet after the address was
// kept: a pod that names no family asks for every family its network has,
// so the re-created pod gets its kept IPv4 address and an IPv6 one.
func TestStatefulSetPodKeptBeforeItsNetworkHadIPv6(t *testing.T) {
	overlay(t, "ov-ds-gain", "10.115.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	n := startNodes(t, "node-a")
	sts := newStatefulSet(t, ns, "db", 1, nil)
	v4 := setUpOn(t, n, newPod(t, ns, "db-0", ownedBy(sts), onNetwork("ov-ds-gain")))
	if len(v4) != 1 || !v4[0].Is4() {
		t.Fatalf("db-0 on an IPv4 network: the node set up %v", v4)
	}
	deletePod(t, podRef(ns, "db-0"))
	waitInstances(t, ns, "db-0", 1, estuaryv1.IPInstanceRetained)

	sn := &estuaryv1.Subnet{}
	sn.Name, sn.Spec = "ov-ds-gain-6", estuaryv1.SubnetSpec{Network: "ov-ds-gain", Range: estuaryv1.AddressRange{Version: 6, CIDR: "fd00:115::/64"}}
	if err := k8s.Create(bg(), sn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(bg(), sn) })
	eventually(t, "the IPv6 subnet installed", func() error {
		got := &estuaryv1.Subnet{}
		if err := k8s.Get(bg(), client.ObjectKeyFromObject(sn), got); err != nil {
			return err
		}
		if got.Status.Total == "" {
			return errors.New("no status yet")
		}
		return nil
	})

	dual := setUpOn(t, n, newPod(t, ns, "db-0", ownedBy(sts), onNetwork("ov-ds-gain")))
	wantDual(t, "db-0 after the network gained IPv6", dual)
	if dual[0] != v4[0] {
		t.Errorf("db-0 got IPv4 %s, want its kept %s", dual[0], v4[0])
	}
	n.check(t, ns)
}

// A retaining Deployment that kept an IPv4 address only: its next pod
// asking for DualStack gets that address and a new IPv6 one, and leaves
// both to the Deployment when it goes.
func TestDeploymentKeptWithOneFamilyAskingForTwo(t *testing.T) {
	overlay(t, "ov-ds-depgrow", "10.116.0.0/24", "fd00:116::/64")
	ns := newNamespace(t, nil)
	startManager(t)
	n := startNodes(t, "node-a")
	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	old := newPod(t, ns, "web-a-0", deployment(t, ns, "web", "a"), retain, ipFamily(estuaryv1.IPFamilyIPv4), onNetwork("ov-ds-depgrow"))
	v4 := setUpOn(t, n, old)
	deletePod(t, old)
	waitOwned(t, ns, "Deployment", "web", 1, estuaryv1.IPInstanceRetained)

	next := newPod(t, ns, "web-b-0", deployment(t, ns, "web", "b"), retain, ipFamily(estuaryv1.IPFamilyDualStack), onNetwork("ov-ds-depgrow"))
	dual := setUpOn(t, n, next)
	wantDual(t, "web-b-0 asking DualStack", dual)
	if dual[0] != v4[0] {
		t.Errorf("web-b-0 got IPv4 %s, want the kept %s", dual[0], v4[0])
	}
	wantCount(t, waitInstances(t, ns, next.Name, 2, estuaryv1.IPInstanceBound), 2)
	deletePod(t, next)
	if kept := addrsOf(t, waitOwned(t, ns, "Deployment", "web", 2, estuaryv1.IPInstanceRetained)); !slices.Equal(kept, dual) {
		t.Errorf("the Deployment keeps %v, want %v", kept, dual)
	}
}

// The reverse: a StatefulSet pod whose kept addresses have both families,
// re-created asking for IPv4 only, is set up with its kept IPv4 address
// alone, and the kept IPv6 address, which nothing of the ordinal asks for
// any more, is released.
func TestStatefulSetPodKeptWithTwoFamiliesAskingForOne(t *testing.T) {
	overlay(t, "ov-ds-shrink", "10.117.0.0/24", "fd00:117::/64")
	ns := newNamespace(t, nil)
	startManager(t)
	n := startNodes(t, "node-a")
	sts := newStatefulSet(t, ns, "db", 1, nil)
	dual := setUpOn(t, n, newPod(t, ns, "db-0", ownedBy(sts), onNetwork("ov-ds-shrink")))
	wantDual(t, "db-0", dual)
	deletePod(t, podRef(ns, "db-0"))
	waitInstances(t, ns, "db-0", 2, estuaryv1.IPInstanceRetained)

	got := setUpOn(t, n, newPod(t, ns, "db-0", ownedBy(sts), ipFamily(estuaryv1.IPFamilyIPv4), onNetwork("ov-ds-shrink")))
	if !slices.Equal(got, dual[:1]) {
		t.Fatalf("db-0 asking IPv4: the node set up %v, want its kept %s alone", got, dual[0])
	}
	wantCount(t, waitInstances(t, ns, "db-0", 1, estuaryv1.IPInstanceBound), 1)
	waitUsed(t, "ov-ds-shrink-1", 0)
	n.check(t, ns)
}
