package podipam

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// A pod the webhook would have refused, admitted while it was bypassed,
// gets no address and an event quoting the rule.
func TestBypassedWebhookPodRulesRefuseAllocation(t *testing.T) {
	overlay(t, "ov-rules", "10.60.0.0/24")
	underlay(t, "u-rules", map[string]string{"rack": "rules-r1"}, "10.61.0.0/24")
	startManager(t)
	ns := newNamespace(t, nil)
	cases := map[string]struct {
		opts []podOpt
		note string
	}{
		"type-mismatch": {[]podOpt{annotated(estuaryv1.AnnotationNetwork, "ov-rules"), annotated(estuaryv1.AnnotationNetworkType, "Underlay")},
			`metadata.annotations[networking.estuary.io/network-type] Underlay does not match network "ov-rules"`},
		"subnet-of-other-network": {[]podOpt{annotated(estuaryv1.AnnotationNetwork, "ov-rules"), annotated(estuaryv1.AnnotationSubnet, "u-rules-0")},
			`names subnet "u-rules-0", whose spec.network is "u-rules", not the requested network "ov-rules"`},
		"no-network": {[]podOpt{annotated(estuaryv1.AnnotationNetwork, "nowhere")},
			`names network "nowhere", which does not exist`},
	}
	for name, c := range cases {
		newPod(t, ns, name, c.opts...)
	}
	for name, c := range cases {
		eventually(t, "AllocationFailed event for "+name, func() error { return eventNote(ns, name, ReasonAllocationFailed, c.note) })
		if n := len(instancesOf(t, ns, name)); n != 0 {
			t.Errorf("pod %s refused by the rules got %d addresses", name, n)
		}
	}
	waitUsed(t, "ov-rules-0", 0)
	waitUsed(t, "u-rules-0", 0)
}

// A pod placed outside its Underlay network's domain gets no address until
// its node joins the domain.
func TestPodOutsideNetworkDomainGetsNoAddress(t *testing.T) {
	overlay(t, "ov-dom", "10.62.0.0/24")
	underlay(t, "u-dom", map[string]string{"rack": "dom-r1"}, "10.63.0.0/24")
	newNode(t, "dom-in", map[string]string{"rack": "dom-r1"})
	newNode(t, "dom-out", map[string]string{"rack": "dom-r2"})
	startManager(t)
	ns := newNamespace(t, map[string]string{estuaryv1.AnnotationNetwork: "u-dom"})

	in := waitInstances(t, ns, newPod(t, ns, "in", onNode("dom-in")).Name, 1, estuaryv1.IPInstanceBound)[0]
	if in.Spec.Network != "u-dom" {
		t.Errorf("pod in the domain got network %s, want u-dom", in.Spec.Network)
	}
	newPod(t, ns, "out", onNode("dom-out"))
	newPod(t, ns, "nowhere", onNode("dom-missing"))
	// An overlay pod on the same node is not affected.
	waitInstances(t, ns, newPod(t, ns, "ov", onNode("dom-out"), annotated(estuaryv1.AnnotationNetwork, "ov-dom")).Name, 1, estuaryv1.IPInstanceBound)
	eventually(t, "OutsideNetworkDomain event for out", func() error {
		return eventNote(ns, "out", ReasonOutsideNetworkDomain, `node "dom-out" is outside the domain of network "u-dom": its labels do not match the network's nodeSelector {rack=dom-r1}`)
	})
	eventually(t, "OutsideNetworkDomain event for nowhere", func() error {
		return eventNote(ns, "nowhere", ReasonOutsideNetworkDomain, `node "dom-missing" does not exist`)
	})
	for _, name := range []string{"out", "nowhere"} {
		if n := len(instancesOf(t, ns, name)); n != 0 {
			t.Errorf("pod %s outside the domain got %d addresses", name, n)
		}
	}
	waitUsed(t, "u-dom-0", 1)

	node := &corev1.Node{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: "dom-out"}, node); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Labels["rack"] = "dom-r1"
	if err := k8s.Patch(bg(), node, patch); err != nil {
		t.Fatal(err)
	}
	waitInstances(t, ns, "out", 1, estuaryv1.IPInstanceBound)
}

// underlay creates a VLAN Underlay network for selector with one IPv4 subnet
// per CIDR, named <name>-<i>, each with its first address as gateway.
func underlay(t *testing.T, name string, selector map[string]string, cidrs ...string) {
	t.Helper()
	subnets := map[string]estuaryv1.SubnetSpec{}
	for i, c := range cidrs {
		gw := strings.TrimSuffix(c, ".0/24") + ".1"
		subnets[fmt.Sprintf("%s-%d", name, i)] = estuaryv1.SubnetSpec{Network: name,
			Range: estuaryv1.AddressRange{Version: 4, CIDR: c, Gateway: estuaryv1.IPAddress(gw)}}
	}
	newNetwork(t, name, estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeVLAN,
		NetID: ptr.To[int64](100), NodeSelector: selector}, subnets)
}

func newNode(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := k8s.Create(bg(), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(bg(), n) })
}

// eventNote finds an event with reason about the pod whose note contains
// want.
func eventNote(ns, pod, reason, want string) error {
	var list eventsv1.EventList
	if err := k8s.List(bg(), &list, client.InNamespace(ns)); err != nil {
		return err
	}
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Name == pod && e.Reason == reason {
			if strings.Contains(e.Note, want) {
				return nil
			}
			notes = append(notes, e.Note)
		}
	}
	return fmt.Errorf("no %s event for pod %s containing %q (have %q)", reason, pod, want, notes)
}

// A pod of a namespace its network does not list gets no address, and an
// event says why; a pod of a listed namespace gets one.
func TestNetworkNamespacesRefusePodsOfOthers(t *testing.T) {
	allowed, other := newNamespace(t, nil), newNamespace(t, nil)
	newNetwork(t, "ov-ns-only", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, NetID: ptr.To[int64](9), Namespaces: []string{allowed}},
		map[string]estuaryv1.SubnetSpec{"ov-ns-only-v4": {Network: "ov-ns-only", Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.70.0.0/24"}}})
	startManager(t)
	waitInstances(t, allowed, newPod(t, allowed, "in", annotated(estuaryv1.AnnotationNetwork, "ov-ns-only")).Name, 1, estuaryv1.IPInstanceBound)
	newPod(t, other, "out", annotated(estuaryv1.AnnotationNetwork, "ov-ns-only"))
	eventually(t, "an AllocationFailed event naming the network's namespaces", func() error {
		return eventNote(other, "out", ReasonAllocationFailed, "spec.namespaces")
	})
	if n := len(instancesOf(t, other, "out")); n != 0 {
		t.Errorf("a pod outside the network's namespaces got %d addresses", n)
	}
}
