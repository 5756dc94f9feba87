package translate

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

func TestBuildUnderlayInput(t *testing.T) {
	r1 := map[string]string{"rack": "r1"}
	self := objtest.Labelled(objtest.Node("node-1", "", "", "10.77.0.11"), r1)
	deleting := objtest.UnderlayNet("gone", "", 7, r1)
	deleting.DeletionTimestamp = &metav1.Time{}
	yes := true
	vlanB := objtest.Subnet("vlan-b", "vlan", "192.168.11.0/24", &yes)
	id := int64(101)
	vlanB.Spec.NetID = &id
	vlanA := objtest.Subnet("vlan-a", "vlan", "192.168.10.0/24", nil)
	vlanA.Spec.Range.Gateway = "192.168.10.1"
	objs := Objects{
		Networks: []estuaryv1.Network{objtest.Network("overlay", estuaryv1.NetworkTypeOverlay, 4),
			objtest.UnderlayNet("vlan", "", 100, r1), objtest.UnderlayNet("other", estuaryv1.NetworkModeVLAN, 0, map[string]string{"rack": "r2"}),
			objtest.BGPNet("fabric", 65010, r1, "10.77.0.1"), deleting},
		Subnets: []estuaryv1.Subnet{vlanB, vlanA, objtest.Subnet("ov4", "overlay", "10.78.0.0/16", nil),
			objtest.Subnet("other-a", "other", "192.168.20.0/24", nil), objtest.Subnet("fabric-a", "fabric", "10.90.0.0/24", nil),
			objtest.Subnet("bad", "vlan", "192.168.30.0/33", nil)},
	}
	pods := objtest.Addrs("10.78.0.3", "10.90.0.9", "192.168.10.5", "192.168.10.6", "192.168.20.7")
	in, err := BuildUnderlayInput(&self, "eth0", objs, pods)
	if err == nil || !strings.Contains(err.Error(), "subnet bad") {
		t.Fatalf("error = %v; want one naming subnet bad", err)
	}
	if in.Uplink != "eth0" || len(in.Networks) != 2 || in.Networks[1].Name != "vlan" || in.Networks[1].VLAN != 100 ||
		in.Networks[1].Mode != underlay.ModeVLAN {
		t.Fatalf("networks = %+v; want fabric and vlan (in the domain, not being deleted)", in.Networks)
	}
	if f := in.Networks[0]; f.Name != "fabric" || f.Mode != underlay.ModeBGP || f.VLAN != 0 ||
		!slices.Equal(f.Peers, objtest.Addrs("10.77.0.1")) || len(f.Subnets) != 1 ||
		!slices.Equal(f.Subnets[0].LocalPods, objtest.Addrs("10.90.0.9")) {
		t.Fatalf("fabric = %+v; want BGP mode, its peer, fabric-a with its pod", f)
	}
	subs := in.Networks[1].Subnets
	if len(subs) != 2 || subs[0].Name != "vlan-a" || subs[1].Name != "vlan-b" {
		t.Fatalf("subnets = %+v; want vlan-a and vlan-b", subs)
	}
	a, b := subs[0], subs[1]
	if a.Gateway != netip.MustParseAddr("192.168.10.1") || a.VLAN != nil || a.NATOutgoing ||
		!slices.Equal(a.LocalPods, objtest.Addrs("192.168.10.5", "192.168.10.6")) {
		t.Fatalf("vlan-a = %+v; want its gateway, the network's VLAN, no NAT and the two local pods inside it", a)
	}
	if b.VLAN == nil || *b.VLAN != 101 || !b.NATOutgoing || len(b.LocalPods) != 0 {
		t.Fatalf("vlan-b = %+v; want VLAN 101, NAT, no pods", b)
	}
	var names []string
	for _, r := range in.Cluster {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"fabric-a", "other-a", "vlan-a", "vlan-b"}) {
		t.Fatalf("cluster = %v; want every valid Underlay subnet of any mode and domain", names)
	}

	out := objtest.Labelled(self, map[string]string{"rack": "r9"})
	in, _ = BuildUnderlayInput(&out, "eth0", objs, pods)
	if len(in.Networks) != 0 || len(in.Cluster) != 4 {
		t.Fatalf("outside every domain: networks %+v, cluster %d; want none and all 4", in.Networks, len(in.Cluster))
	}

	nets, err := BuildBGPNetworks(&self, objs, pods)
	if err != nil || len(nets) != 1 || nets[0].Name != "fabric" || nets[0].ASN != 65010 {
		t.Fatalf("bgp networks = %+v, %v; want fabric, AS 65010", nets, err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.90.0.0/24"), netip.MustParsePrefix("10.90.0.9/32")}
	if !slices.Equal(nets[0].Prefixes, want) {
		t.Fatalf("prefixes = %v, want %v", nets[0].Prefixes, want)
	}
}
