package podipam

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// A pod asking for Underlay by type takes the Underlay network of the node
// it is bound to; on a node of no Underlay domain it gets no address and an
// event naming the node, until the node joins a domain. A named network
// still wins.
func TestUnderlayByTypeTakesTheNodesNetwork(t *testing.T) {
	underlay(t, "bt-ua", map[string]string{"bt-rack": "a"}, "10.83.0.0/24")
	underlay(t, "bt-ub", map[string]string{"bt-rack": "b"}, "10.84.0.0/24")
	overlay(t, "bt-ov", "10.85.0.0/24")
	newNode(t, "bt-a", map[string]string{"bt-rack": "a"})
	newNode(t, "bt-b", map[string]string{"bt-rack": "b"})
	newNode(t, "bt-z", map[string]string{"bt-rack": "z"})
	startManager(t)
	ns := newNamespace(t, nil)
	byType := annotated(estuaryv1.AnnotationNetworkType, "Underlay")

	for pod, want := range map[string]string{"bt-a": "bt-ua", "bt-b": "bt-ub"} {
		got := waitInstances(t, ns, newPod(t, ns, "on-"+pod, onNode(pod), byType).Name, 1, estuaryv1.IPInstanceBound)[0]
		if got.Spec.Network != want || got.Spec.Subnet != want+"-0" {
			t.Errorf("pod on %s got network %s subnet %s, want %s", pod, got.Spec.Network, got.Spec.Subnet, want)
		}
	}
	inherits := newNamespace(t, map[string]string{estuaryv1.AnnotationNetworkType: "Underlay"})
	if got := waitInstances(t, inherits, newPod(t, inherits, "inherited", onNode("bt-b")).Name, 1, estuaryv1.IPInstanceBound)[0]; got.Spec.Network != "bt-ub" {
		t.Errorf("pod of a namespace asking by type got network %s, want bt-ub", got.Spec.Network)
	}

	newPod(t, ns, "on-z", onNode("bt-z"), byType)
	newPod(t, ns, "named", onNode("bt-a"), byType, onNetwork("bt-ub"))
	eventually(t, "OutsideNetworkDomain event for on-z", func() error {
		return eventNotes(ns, "on-z", ReasonOutsideNetworkDomain,
			`asks for an Underlay network by type and node "bt-z" is in the domain of none it may use`, "bt-ua {bt-rack=a}", "bt-ub {bt-rack=b}")
	})
	eventually(t, "OutsideNetworkDomain event for the named network", func() error {
		return eventNotes(ns, "named", ReasonOutsideNetworkDomain, `node "bt-a" is outside the domain of network "bt-ub"`)
	})
	for _, name := range []string{"on-z", "named"} {
		if n := len(instancesOf(t, ns, name)); n != 0 {
			t.Errorf("pod %s got %d addresses", name, n)
		}
	}
	waitUsed(t, "bt-ov-0", 0)

	relabelNode(t, "bt-z", "bt-rack", "a")
	if got := waitInstances(t, ns, "on-z", 1, estuaryv1.IPInstanceBound)[0]; got.Spec.Network != "bt-ua" {
		t.Errorf("pod on the relabelled node got network %s, want bt-ua", got.Spec.Network)
	}
}

// With defaults Underlay, IPv4 and no StatefulSet retention, the manager
// gives a pod that says nothing an IPv4 address of its node's Underlay
// network, an Overlay pod of a dual-stack overlay IPv4 only unless it asks
// for more, refuses a default family the pod's network lacks with an event
// naming both, and releases a StatefulSet pod's addresses unless its
// template keeps them.
func TestClusterDefaultsAllocate(t *testing.T) {
	underlay(t, "bd-u", map[string]string{"bd-rack": "a"}, "10.83.10.0/24")
	newNetwork(t, "bd-u6", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeVLAN, NodeSelector: map[string]string{"bd-rack": "six"}},
		map[string]estuaryv1.SubnetSpec{"bd-u6-0": {Network: "bd-u6", Range: estuaryv1.AddressRange{Version: 6, CIDR: "fd83:6::/64", Gateway: "fd83:6::1"}}})
	overlay(t, "bd-ov", "10.85.10.0/24", "fd85:10::/64")
	newNode(t, "bd-a", map[string]string{"bd-rack": "a"})
	newNode(t, "bd-6", map[string]string{"bd-rack": "six"})
	_, stop := startManagerWith(t, testManager{rc: cfg, defaults: netmodel.Defaults{
		NetworkType: estuaryv1.NetworkTypeUnderlay, IPFamily: estuaryv1.IPFamilyIPv4, NoStatefulRetain: true}})
	defer stop()
	ns := newNamespace(t, nil)

	if got := waitInstances(t, ns, newPod(t, ns, "plain", onNode("bd-a")).Name, 1, estuaryv1.IPInstanceBound)[0]; got.Spec.Network != "bd-u" || got.Spec.Address.Version != 4 {
		t.Errorf("pod saying nothing got network %s version %d, want bd-u IPv4", got.Spec.Network, got.Spec.Address.Version)
	}
	overlayType := annotated(estuaryv1.AnnotationNetworkType, "Overlay")
	if got := waitInstances(t, ns, newPod(t, ns, "ov", onNode("bd-a"), overlayType).Name, 1, estuaryv1.IPInstanceBound)[0]; got.Spec.Network != "bd-ov" || got.Spec.Address.Version != 4 {
		t.Errorf("Overlay pod got network %s version %d, want bd-ov IPv4 only", got.Spec.Network, got.Spec.Address.Version)
	}
	waitInstances(t, ns, newPod(t, ns, "ov-dual", onNode("bd-a"), overlayType, annotated(estuaryv1.AnnotationIPFamily, "DualStack")).Name, 2, estuaryv1.IPInstanceBound)

	newPod(t, ns, "v6-net", onNode("bd-6"), onNetwork("bd-u6"))
	eventually(t, "AllocationFailed event naming the network and the default family", func() error {
		return eventNotes(ns, "v6-net", ReasonAllocationFailed, "default IP family IPv4", "--default-ip-family", `network "bd-u6" has no public IPv4 subnet`)
	})
	if n := len(instancesOf(t, ns, "v6-net")); n != 0 {
		t.Errorf("pod whose network lacks the default family got %d addresses", n)
	}

	released := newStatefulSet(t, ns, "bd-db", 1, nil)
	kept := newStatefulSet(t, ns, "bd-keep", 1, map[string]string{estuaryv1.AnnotationIPRetain: "true"})
	p := newPod(t, ns, "bd-db-0", onNode("bd-a"), overlayType, ownedBy(released))
	q := newPod(t, ns, "bd-keep-0", onNode("bd-a"), overlayType, ownedBy(kept), annotated(estuaryv1.AnnotationIPRetain, "true"))
	waitInstances(t, ns, p.Name, 1, estuaryv1.IPInstanceBound)
	waitInstances(t, ns, q.Name, 1, estuaryv1.IPInstanceBound)
	deletePod(t, p)
	deletePod(t, q)
	waitInstances(t, ns, q.Name, 1, estuaryv1.IPInstanceRetained)
	eventually(t, "the StatefulSet pod's address released under --default-ip-retain=false", func() error {
		if n := len(instancesOf(t, ns, p.Name)); n != 0 {
			return fmt.Errorf("%d records left", n)
		}
		return nil
	})
}

// eventNotes finds an event with reason about the pod whose note contains
// every one of want.
func eventNotes(ns, pod, reason string, want ...string) error {
	var list eventsv1.EventList
	if err := k8s.List(bg(), &list, client.InNamespace(ns)); err != nil {
		return err
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name != pod || e.Reason != reason {
			continue
		}
		if !slices.ContainsFunc(want, func(w string) bool { return !strings.Contains(e.Note, w) }) {
			return nil
		}
		notes = append(notes, e.Note)
	}
	return fmt.Errorf("no %s event for pod %s containing all of %q (have %q)", reason, pod, want, notes)
}

func relabelNode(t *testing.T, name, key, value string) {
	t.Helper()
	node := &corev1.Node{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: name}, node); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Labels[key] = value
	if err := k8s.Patch(bg(), node, patch); err != nil {
		t.Fatal(err)
	}
}
