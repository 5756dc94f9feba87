package translate

import (
	"net/netip"
	"slices"
	"testing"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// globalObjects: an Overlay network, the BGP network fabric over rack r1
// (a route reflector that routes no traffic listed before the ToR), and
// the GlobalBGP network global with two subnets.
func globalObjects() Objects {
	fabric := objtest.BGPNet("fabric", 65010, map[string]string{"rack": "r1"}, "10.77.0.200", "10.77.0.1")
	fabric.Spec.BGPPeers[0].DoesNotRouteTraffic = true
	return Objects{
		Networks: []estuaryv1.Network{objtest.Network("overlay", estuaryv1.NetworkTypeOverlay, 4), fabric,
			objtest.Network("global", estuaryv1.NetworkTypeGlobalBGP, 0)},
		Subnets: []estuaryv1.Subnet{objtest.Subnet("ov4", "overlay", "10.78.0.0/16", nil),
			objtest.Subnet("fabric-a", "fabric", "10.90.0.0/24", nil),
			objtest.Subnet("global-a", "global", "10.84.0.0/24", nil), objtest.Subnet("global-b", "global", "10.85.0.0/24", nil)},
	}
}

// A node of a BGP network announces, with that network's speaker, the
// host route of each of its GlobalBGP pods and never a GlobalBGP subnet's
// prefix (its addresses live on every node); its own subnets' prefixes and
// pods as before. Pods of other nodes are not announced.
func TestBuildBGPNetworksAnnouncesGlobalPods(t *testing.T) {
	self := objtest.Labelled(objtest.Node("node-1", "", "", "10.77.0.11"), map[string]string{"rack": "r1"})
	local := objtest.Addrs("10.78.0.3", "10.90.0.9", "10.84.0.7", "10.85.0.2")
	nets, err := BuildBGPNetworks(&self, globalObjects(), local)
	if err != nil || len(nets) != 1 || nets[0].Name != "fabric" || nets[0].ASN != 65010 {
		t.Fatalf("bgp networks = %+v, %v; want fabric, AS 65010", nets, err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.84.0.7/32"), netip.MustParsePrefix("10.85.0.2/32"),
		netip.MustParsePrefix("10.90.0.0/24"), netip.MustParsePrefix("10.90.0.9/32"),
	}
	if !slices.Equal(nets[0].Prefixes, want) {
		t.Fatalf("prefixes = %v, want %v", nets[0].Prefixes, want)
	}
	if g := nets[0].Global; !slices.Equal(g, []netip.Prefix{netip.MustParsePrefix("10.84.0.0/24"), netip.MustParsePrefix("10.85.0.0/24")}) {
		t.Fatalf("global subnets = %v", g)
	}

	none, err := BuildBGPNetworks(&self, globalObjects(), objtest.Addrs("10.90.0.9"))
	if err != nil || len(none) != 1 || slices.ContainsFunc(none[0].Prefixes, func(p netip.Prefix) bool { return p.Addr().As4()[1] == 84 }) {
		t.Fatalf("without local GlobalBGP pods: %+v, %v; want no 10.84 prefix", none, err)
	}

	outside := objtest.Labelled(self, map[string]string{"rack": "r9"})
	if nets, err := BuildBGPNetworks(&outside, globalObjects(), local); err != nil || len(nets) != 0 {
		t.Fatalf("a node outside every BGP domain: %+v, %v; want no speaker (its GlobalBGP pods are not announced)", nets, err)
	}
}

// The underlay input of a BGP node counts the GlobalBGP subnets as its BGP
// network's (so its GlobalBGP pods leave through the same peer), numbers
// them with the cluster's underlay subnets, and leaves a peer marked
// doesNotRouteTraffic out of the gateways.
func TestBuildUnderlayInputGlobalBGP(t *testing.T) {
	self := objtest.Labelled(objtest.Node("node-1", "", "", "10.77.0.11"), map[string]string{"rack": "r1"})
	in, err := BuildUnderlayInput(&self, "eth0", globalObjects(), objtest.Addrs("10.90.0.9", "10.84.0.7"))
	if err != nil || len(in.Networks) != 1 {
		t.Fatalf("networks = %+v, %v; want fabric", in.Networks, err)
	}
	f := in.Networks[0]
	if f.Mode != underlay.ModeBGP || !slices.Equal(f.Peers, objtest.Addrs("10.77.0.1")) {
		t.Fatalf("fabric = %+v; want BGP mode with only the peer that routes traffic", f)
	}
	var names []string
	for _, s := range f.Subnets {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"fabric-a", "global-a", "global-b"}) {
		t.Fatalf("fabric's subnets = %v; want its own and the GlobalBGP ones", names)
	}
	if g := f.Subnets[1]; !slices.Equal(g.LocalPods, objtest.Addrs("10.84.0.7")) || g.NATOutgoing {
		t.Fatalf("global-a = %+v; want its local pod and no NAT", g)
	}
	names = nil
	for _, r := range in.Cluster {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"fabric-a", "global-a", "global-b"}) {
		t.Fatalf("cluster = %v; want the Underlay and GlobalBGP subnets", names)
	}
}
