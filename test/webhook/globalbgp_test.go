package webhook

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/family"
)

func globalNet(name string) *estuaryv1.Network {
	return &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeGlobalBGP}}
}

// bgpWithPeers is a BGP network over sel with the given peers.
func bgpWithPeers(name string, s map[string]string, peers ...estuaryv1.BGPPeer) *estuaryv1.Network {
	n := underlayNet(name, bgp, s)
	n.Spec.BGPPeers = peers
	return n
}

// The GlobalBGP rules: one such network at most (the denial names the
// existing one); no mode, netID or nodeSelector; and the per-peer knobs:
// some peer must route traffic, requireEstablished needs the wait on.
func TestGlobalBGPDenials(t *testing.T) { runDenials(t, globalBGPDenials()) }

func globalBGPDenials() []denial {
	with := func(f func(*estuaryv1.Network)) *estuaryv1.Network { n := globalNet("g2"); f(n); return n }
	return []denial{
		{name: "second GlobalBGP network",
			seed: []client.Object{globalNet("g1")}, create: globalNet("g2"),
			want: []string{`network "g2"`, "spec.type", "GlobalBGP", "already has a GlobalBGP network", `network "g1"`, "only one"}},
		{name: "GlobalBGP network with a nodeSelector (schema)", schema: true,
			create: with(func(n *estuaryv1.Network) { n.Spec.NodeSelector = sel("rack", "r1") }),
			want:   []string{`"g2"`, "spec.nodeSelector", "GlobalBGP network spans every node"}},
		{name: "GlobalBGP network with a netID (schema)", schema: true,
			create: with(func(n *estuaryv1.Network) { n.Spec.NetID = ptr.To[int64](65000) }),
			want:   []string{`"g2"`, "spec.netID", "GlobalBGP network takes no netID"}},
		{name: "GlobalBGP network with a mode (schema)", schema: true,
			create: with(func(n *estuaryv1.Network) { n.Spec.Mode = bgp }),
			want:   []string{`"g2"`, "spec.mode", "GlobalBGP network takes no mode"}},
		{name: "GlobalBGP network with peers (schema)", schema: true,
			create: with(func(n *estuaryv1.Network) { n.Spec.BGPPeers = []estuaryv1.BGPPeer{{Address: "10.255.0.1", ASN: 64512}} }),
			want:   []string{`"g2"`, "spec.bgpPeers", "only allowed on a network in mode BGP"}},
		{name: "no peer routes traffic (schema)", schema: true,
			create: bgpWithPeers("b-rr", sel("bgp", "rr"),
				estuaryv1.BGPPeer{Address: "10.255.0.1", ASN: 64512, DoesNotRouteTraffic: true},
				estuaryv1.BGPPeer{Address: "10.255.0.2", ASN: 64512, DoesNotRouteTraffic: true}),
			want: []string{`"b-rr"`, "spec.bgpPeers", "at least one of bgpPeers must route traffic"}},
		{name: "requireEstablished without the wait (schema)", schema: true,
			create: func() client.Object {
				n := bgpWithPeers("b-nowait", sel("bgp", "nowait"), estuaryv1.BGPPeer{Address: "10.255.0.1", ASN: 64512, RequireEstablished: true})
				n.Spec.BGPWaitForPeer = ptr.To(false)
				return n
			}(),
			want: []string{`"b-nowait"`, "spec.bgpPeers", "requireEstablished has no effect while bgpWaitForPeer is false"}},
		{name: "GlobalBGP pod while the cluster has no BGP network",
			seed:   []client.Object{globalNet("g-lone"), subnetObj("g-lone4", "g-lone", "10.85.0.0/24")},
			create: podObj("default", "g-nobgp", sel(annNet, "g-lone")),
			want:   []string{`pod "default/g-nobgp"`, `GlobalBGP network "g-lone"`, "the cluster has no such network", "create a BGP network first"}},
		{name: "pod asks for GlobalBGP by type without one", seed: []client.Object{overlayNet("ov-g")},
			create: podObj("default", "want-global", sel(netmodel.HybridnetNetworkType, "globalbgp")),
			want:   []string{ann(netmodel.HybridnetNetworkType), "GlobalBGP", "the cluster has no GlobalBGP network"}},
	}
}

// What is admitted: a GlobalBGP network beside an Overlay and two BGP
// networks whose peers carry both knobs; a pod asking for the GlobalBGP
// network by name, by estuary's or hybridnet's network-type and by subnet
// gets it, with one node affinity term per BGP network (its nodeSelector
// and, unless the pod names its subnet, the GlobalBGP network's capacity),
// ORed; a pod's own terms are crossed with them.
func TestGlobalBGPAdmitted(t *testing.T) {
	seedGlobalWithTwoBGP(t)
	alt := func(domain string, reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return term(append([]corev1.NodeSelectorRequirement{in("bgp", domain)}, reqs...)...)
	}
	room := notFull("global", family.IPv4)
	pool := required(alt("a", room), alt("b", room))
	own := withAffinity(required(term(in("zone", "z1")), term(in("zone", "z2"))))
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want *corev1.Affinity
	}{
		{"by name", podObj("default", "g-name", sel(annNet, "global")), pool},
		{"by estuary type", podObj("default", "g-type", sel(estuaryv1.AnnotationNetworkType, "GlobalBGP")), pool},
		{"by hybridnet type, any case", podObj("default", "g-hn", sel(netmodel.HybridnetNetworkType, "globalBGP")), pool},
		{"by hybridnet type label", podObj("default", "g-hn-label", nil, labelled(sel(netmodel.HybridnetNetworkType, "GlobalBGP"))), pool},
		{"by subnet: domains, no capacity term", podObj("default", "g-subnet", sel(annSub, "global4")), required(alt("a"), alt("b"))},
		{"own terms crossed with the domains", podObj("default", "g-own", sel(annNet, "global"), own),
			required(term(in("zone", "z1"), in("bgp", "a"), room), term(in("zone", "z1"), in("bgp", "b"), room),
				term(in("zone", "z2"), in("bgp", "a"), room), term(in("zone", "z2"), in("bgp", "b"), room))},
	} {
		t.Run(c.name, func(t *testing.T) {
			create(t, c.pod)
			got := &corev1.Pod{}
			if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(c.pod), got); err != nil {
				t.Fatalf("get pod: %v", err)
			}
			if !equality.Semantic.DeepEqual(got.Spec.Affinity, c.want) {
				t.Errorf("affinity =\n%+v\nwant\n%+v", affinityString(got.Spec.Affinity), affinityString(c.want))
			}
		})
	}
}

// seedGlobalWithTwoBGP seeds an Overlay network, the GlobalBGP network
// "global" (subnet global4) and the BGP networks bgp-a and bgp-b, over
// bgp=a and bgp=b.
func seedGlobalWithTwoBGP(t *testing.T) {
	t.Helper()
	seed(t, overlayNet("ov"), globalNet("global"),
		bgpWithPeers("bgp-a", sel("bgp", "a"),
			estuaryv1.BGPPeer{Address: "10.255.0.1", ASN: 64512, RequireEstablished: true},
			estuaryv1.BGPPeer{Address: "10.255.0.9", ASN: 64512, DoesNotRouteTraffic: true}),
		bgpWithPeers("bgp-b", sel("bgp", "b"), estuaryv1.BGPPeer{Address: "10.255.1.1", ASN: 64513}),
		subnetObj("ov4", "ov", "10.0.0.0/16"), subnetObj("global4", "global", "10.84.0.0/24"))
}

// TestGlobalBGPPodFitsOnlyBGPNodes: as the scheduler's node affinity filter
// evaluates it, a GlobalBGP pod fits a node of either BGP network's domain
// with room in the GlobalBGP network (or not yet counted), and no node
// outside every BGP domain or whose label says the network is full.
func TestGlobalBGPPodFitsOnlyBGPNodes(t *testing.T) {
	seedGlobalWithTwoBGP(t)
	pod := podObj("default", "g-fit", sel(annNet, "global"))
	create(t, pod)
	got := &corev1.Pod{}
	if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(pod), got); err != nil {
		t.Fatal(err)
	}
	key := netmodel.AvailableKey("global", family.IPv4)
	for _, c := range []struct {
		labels map[string]string
		fits   bool
	}{
		{sel("bgp", "a"), true},
		{sel("bgp", "b", key, netmodel.ValueTrue), true},
		{sel("bgp", "a", key, netmodel.ValueFalse), false},
		{sel("bgp", "c", key, netmodel.ValueTrue), false},
		{sel("rack", "r1"), false},
		{nil, false},
	} {
		if fits := fitsRequired(t, got, c.labels); fits != c.fits {
			t.Errorf("node labels %v: pod fits %v, want %v (affinity %s)", c.labels, fits, c.fits, affinityString(got.Spec.Affinity))
		}
	}
}

// usedOn records ipi as used by its pod on node.
func usedOn(ipi *estuaryv1.IPInstance, node string) *estuaryv1.IPInstance {
	ipi.Spec.Binding.NodeName = node
	return ipi
}

// TestBGPNetworkDeleteRefused: deleting a BGP network is refused while
// GlobalBGP addresses are in use on its nodes, the denial naming the
// GlobalBGP network, the count (those on other nodes and those kept with
// no node do not count) and one of them with its pod and node; once they
// are gone it is admitted. A VLAN network whose node holds a GlobalBGP
// address is deleted at once.
func TestBGPNetworkDeleteRefused(t *testing.T) {
	bgpD := bgpWithPeers("bgp-d", sel("bgp", "d"), estuaryv1.BGPPeer{Address: "10.255.2.1", ASN: 64514})
	vlanX := underlayNet("vlan-x", vlan, sel("bgp", "x"))
	p1 := usedOn(instance("default", "p1", "global-d", "global-d4", "10.86.0.5/24"), "node-d1")
	p2 := usedOn(instance("default", "p2", "global-d", "global-d4", "10.86.0.6/24"), "node-d2")
	seed(t, globalNet("global-d"), subnetObj("global-d4", "global-d", "10.86.0.0/24"), bgpD, vlanX,
		nodeObj("node-d1", sel("bgp", "d")), nodeObj("node-d2", sel("bgp", "d")), nodeObj("node-x", sel("bgp", "x")),
		p1, p2,
		usedOn(instance("default", "p3", "global-d", "global-d4", "10.86.0.7/24"), "node-x"),
		instance("default", "p4", "global-d", "global-d4", "10.86.0.8/24"))

	requireDenied(t, k8s.Delete(ctx(t), bgpD), `admission webhook "`, "denied the request",
		`network "bgp-d"`, `GlobalBGP network "global-d" has 2 addresses in use on its nodes`,
		fmt.Sprintf(`ipinstance %q (10.86.0.5/24, pod "default/p1" on node "node-d1")`, p1.Name), "delete those pods first")
	requireUnchanged(t, bgpD)

	if err := k8s.Delete(ctx(t), vlanX); err != nil {
		t.Errorf("delete VLAN network vlan-x: %v", err)
	}
	remove(t, p1)
	remove(t, p2)
	if err := k8s.Delete(ctx(t), bgpD); err != nil {
		t.Errorf("delete bgp-d once no GlobalBGP address is used on its nodes: %v", err)
	}
}
