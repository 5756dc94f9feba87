package podipam

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

func labelledPod(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[k] = v
	}
}

// hnDualStack creates a dual-stack VLAN network hn-ds over rack hn-r1, with
// subnets hn-ds4 (10.88.1.0/24) and hn-ds6 (fd00:88:1::/64), an IPv4 subnet
// hn-ds4b (10.88.2.0/24), and a node in its domain.
func hnDualStack(t *testing.T) {
	t.Helper()
	newNetwork(t, "hn-ds", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeVLAN,
		NetID: ptr.To[int64](88), NodeSelector: map[string]string{"rack": "hn-r1"}}, map[string]estuaryv1.SubnetSpec{
		"hn-ds4":  {Network: "hn-ds", Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.88.1.0/24", Gateway: "10.88.1.1"}},
		"hn-ds4b": {Network: "hn-ds", Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.88.2.0/24", Gateway: "10.88.2.1"}},
		"hn-ds6":  {Network: "hn-ds", Range: estuaryv1.AddressRange{Version: 6, CIDR: "fd00:88:1::/64", Gateway: "fd00:88:1::1"}},
	})
	newNode(t, "hn-node", map[string]string{"rack": "hn-r1"})
}

// placed is where a pod's addresses came from: network, subnet and address
// per family, IPv4 first.
func placed(t *testing.T, items []estuaryv1.IPInstance) []string {
	t.Helper()
	var out []string
	for _, ipi := range items {
		out = append(out, ipi.Spec.Network+"/"+ipi.Spec.Subnet)
	}
	slices.Sort(out)
	return out
}

// Pods written for hybridnet (its annotations and labels, in its syntax)
// get addresses from the same networks and subnets as the same pods
// written with estuary's annotations, and exactly the addresses their
// hybridnet ip-pool names; a namespace's hybridnet keys apply to its pods.
func TestHybridnetKeysAllocateAsEstuarys(t *testing.T) {
	overlay(t, "hn-ov", "10.88.0.0/24")
	hnDualStack(t)
	startManager(t)
	ns := newNamespace(t, nil)
	onHN := onNode("hn-node")
	pairs := []struct {
		name            string
		estuary, hybrid []podOpt
		want            []string
	}{
		{"v4/v6 subnets",
			[]podOpt{annotated(estuaryv1.AnnotationSubnet, "hn-ds4b,hn-ds6")},
			[]podOpt{annotated(netmodel.HybridnetSubnet, "hn-ds4b/hn-ds6")},
			[]string{"hn-ds/hn-ds4b", "hn-ds/hn-ds6"}},
		{"network label, IPv6Only",
			[]podOpt{annotated(estuaryv1.AnnotationNetwork, "hn-ds"), annotated(estuaryv1.AnnotationIPFamily, "IPv6")},
			[]podOpt{labelledPod(netmodel.HybridnetNetwork, "hn-ds"), annotated(netmodel.HybridnetIPFamily, "ipv6only")},
			[]string{"hn-ds/hn-ds6"}},
		{"estuary label",
			[]podOpt{annotated(estuaryv1.AnnotationSubnet, "hn-ds4b")},
			[]podOpt{labelledPod(estuaryv1.AnnotationSubnet, "hn-ds4b")},
			[]string{"hn-ds/hn-ds4b"}},
		{"overlay by type",
			[]podOpt{annotated(estuaryv1.AnnotationNetworkType, "Overlay")},
			[]podOpt{annotated(netmodel.HybridnetNetworkType, "OVERLAY")},
			[]string{"hn-ov/hn-ov-0"}},
	}
	for i, c := range pairs {
		e := newPod(t, ns, "e"+string(rune('a'+i)), append(c.estuary, onHN)...)
		h := newPod(t, ns, "h"+string(rune('a'+i)), append(c.hybrid, onHN)...)
		ge := waitInstances(t, ns, e.Name, len(c.want), estuaryv1.IPInstanceBound)
		gh := waitInstances(t, ns, h.Name, len(c.want), estuaryv1.IPInstanceBound)
		if got, gotE := placed(t, gh), placed(t, ge); !slices.Equal(got, c.want) || !slices.Equal(gotE, c.want) {
			t.Errorf("%s: hybridnet pod got %v, estuary pod %v, want %v", c.name, got, gotE, c.want)
		}
	}

	pool := newPod(t, ns, "pooled", onHN, annotated(netmodel.HybridnetNetwork, "hn-ds"),
		annotated(netmodel.HybridnetIPPool, "10.88.1.77/fd00:88:1::77"), annotated(netmodel.HybridnetMACPool, "0A:58:0A:58:01:4D"))
	got := waitInstances(t, ns, pool.Name, 2, estuaryv1.IPInstanceBound)
	if a := addrsOf(t, got); !slices.Equal(a, []netip.Addr{netip.MustParseAddr("10.88.1.77"), netip.MustParseAddr("fd00:88:1::77")}) {
		t.Errorf("hybridnet ip-pool gave %v", a)
	}
	for _, ipi := range got {
		if ipi.Spec.Address.MAC != "0a:58:0a:58:01:4d" {
			t.Errorf("%s: MAC %q, want the mac-pool's 0a:58:0a:58:01:4d", ipi.Name, ipi.Spec.Address.MAC)
		}
	}

	hnNS := newNamespace(t, nil)
	nsObj := &corev1.Namespace{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: hnNS}, nsObj); err != nil {
		t.Fatal(err)
	}
	nsObj.Labels[netmodel.HybridnetNetwork] = "hn-ds"
	nsObj.Annotations = map[string]string{netmodel.HybridnetIPFamily: "IPv4Only"}
	if err := k8s.Update(bg(), nsObj); err != nil {
		t.Fatal(err)
	}
	inherited := waitInstances(t, hnNS, newPod(t, hnNS, "inherits", onHN).Name, 1, estuaryv1.IPInstanceBound)
	if inherited[0].Spec.Network != "hn-ds" || !addrOf(t, inherited[0]).Is4() {
		t.Errorf("pod of a namespace labelled for hybridnet got %s from %s", addrOf(t, inherited[0]), inherited[0].Spec.Network)
	}
}

// hybridnet's ip-retain, in its syntax, decides retention as estuary's:
// "0" on a StatefulSet's template releases its pod's address with the pod,
// "True" on a Deployment's pod keeps it for the Deployment.
func TestHybridnetIPRetain(t *testing.T) {
	overlay(t, "hn-keep", "10.88.3.0/24")
	startManager(t)
	ns := newNamespace(t, nil)

	off := newStatefulSet(t, ns, "hn-cache", 1, map[string]string{netmodel.HybridnetIPRetain: "0"})
	c := newPod(t, ns, "hn-cache-0", ownedBy(off))
	waitInstances(t, ns, c.Name, 1, estuaryv1.IPInstanceBound)
	deletePod(t, c)
	waitInstances(t, ns, c.Name, 0, "")

	on := newStatefulSet(t, ns, "hn-db", 1, map[string]string{netmodel.HybridnetIPRetain: "T"})
	d := newPod(t, ns, "hn-db-0", ownedBy(on))
	waitInstances(t, ns, d.Name, 1, estuaryv1.IPInstanceBound)
	deletePod(t, d)
	waitInstances(t, ns, d.Name, 1, estuaryv1.IPInstanceRetained)

	rs := deployment(t, ns, "hn-web", "a")
	w := newPod(t, ns, "hn-web-a-0", rs, annotated(netmodel.HybridnetIPRetain, "True"))
	waitOwned(t, ns, "Deployment", "hn-web", 1, estuaryv1.IPInstanceBound)
	deletePod(t, w)
	waitOwned(t, ns, "Deployment", "hn-web", 1, estuaryv1.IPInstanceRetained)
	waitUsed(t, "hn-keep-0", 2)
}

// A pod whose estuary and hybridnet keys disagree gets no address, and the
// event names both keys.
func TestHybridnetConflictRefused(t *testing.T) {
	overlay(t, "hn-conflict", "10.88.4.0/24")
	startManager(t)
	ns := newNamespace(t, nil)
	newPod(t, ns, "both", annotated(estuaryv1.AnnotationIPFamily, "IPv4"), annotated(netmodel.HybridnetIPFamily, "IPv6Only"))
	eventually(t, "AllocationFailed naming both keys", func() error {
		return eventNote(ns, "both", ReasonAllocationFailed,
			`metadata.annotations[networking.estuary.io/ip-family] is "IPv4", but metadata.annotations[networking.alibaba.com/ip-family] on the same object is "IPv6Only"`)
	})
	if n := len(instancesOf(t, ns, "both")); n != 0 {
		t.Errorf("the refused pod got %d addresses", n)
	}
}
