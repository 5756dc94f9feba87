package datapath

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/translate"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// The overlay input carries the natOutgoing underlay subnets of the node's
// domains, the cluster's underlay subnets and kube-proxy's mark.
func TestSyncOverlayUnderlayNATAndMark(t *testing.T) {
	r1 := map[string]string{"rack": "r1"}
	self := objtest.Labelled(objtest.Node("node-1", "", "", "10.77.0.11"), r1)
	yes := true
	objs := translate.Objects{
		Networks: []estuaryv1.Network{objtest.Network("overlay", estuaryv1.NetworkTypeOverlay, 4),
			objtest.UnderlayNet("vlan", "", 0, r1), objtest.BGPNet("fabric", 65010, r1, "10.77.0.1"),
			objtest.UnderlayNet("far", "", 0, map[string]string{"rack": "r2"})},
		Subnets: []estuaryv1.Subnet{objtest.Subnet("ov4", "overlay", "10.78.0.0/16", nil),
			objtest.Subnet("vlan-a", "vlan", "192.168.10.0/24", nil), objtest.Subnet("vlan-nat", "vlan", "192.168.11.0/24", &yes),
			objtest.Subnet("fabric-nat", "fabric", "10.90.0.0/24", &yes), objtest.Subnet("far-nat", "far", "192.168.20.0/24", &yes)},
		Nodes: objtest.Ptrs(self),
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&self).Build()
	dp := &fakeDataplane{}
	vtep := NewVTEPPart(VTEPConfig{Node: "node-1", Writer: c, Log: logr.Discard()})
	s := NewOverlayPart(OverlayConfig{Node: "node-1", Log: logr.Discard(), KubeProxyMark: 0x4000}, dp)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	eps := []endpointstore.Endpoint{{Key: endpointstore.Key{ContainerID: "a", IfName: "eth0"}, IPs: []string{"192.168.11.5/24"}}}
	parent := func() (overlay.Parent, error) { return dp.ResolveParent(overlay.ParentSpec{}) }
	snap := NewSnapshot("node-1", objs, eps, parent)
	for _, p := range []Part{vtep, s} {
		if err := p.Sync(ctx, snap); err != nil {
			t.Fatal(err)
		}
	}
	in, _, _ := dp.last()
	wantNAT := []netip.Prefix{netip.MustParsePrefix("10.90.0.0/24"), netip.MustParsePrefix("192.168.11.0/24")}
	if !slices.Equal(in.UnderlayNAT, wantNAT) {
		t.Errorf("UnderlayNAT = %v, want %v (natOutgoing subnets of the node's domains only)", in.UnderlayNAT, wantNAT)
	}
	if in.KubeProxyMark != 0x4000 {
		t.Errorf("KubeProxyMark = %#x, want 0x4000", in.KubeProxyMark)
	}
	if len(in.Underlays) != 4 {
		t.Errorf("Underlays = %v, want all 4 underlay subnets of the cluster", in.Underlays)
	}
}
