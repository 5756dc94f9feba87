package translate

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

func TestBuildInput(t *testing.T) {
	no := false
	ovl := objtest.Network("overlay", estuaryv1.NetworkTypeOverlay, 4)
	objs := Objects{
		Subnets: []estuaryv1.Subnet{objtest.Subnet("ov4", "overlay", "10.78.0.0/16", nil), objtest.Subnet("ov6", "overlay", "fd00:78::/64", &no),
			objtest.Subnet("rack1", "underlay", "192.168.10.0/24", nil), objtest.Subnet("bad", "overlay", "10.1.0.0/33", nil)},
		Nodes: objtest.Ptrs(objtest.Node("node-1", "10.77.0.11", "0e:00:00:00:00:01", "10.77.0.11"),
			objtest.Node("node-3", "10.77.0.13", "0e:00:00:00:00:03", "10.77.0.13", "fd00:77::13"),
			objtest.Node("node-2", "10.77.0.12", "0e:00:00:00:00:02", "10.77.0.12"), objtest.Node("node-4", "", ""),
			objtest.Node("node-5", "10.77.0.15", "not-a-mac")),
	}
	eps := []endpointstore.Endpoint{{Key: endpointstore.Key{ContainerID: "a", IfName: "eth0"}, IPs: []string{"10.78.0.9/32", "fd00:78::9/128"}},
		{Key: endpointstore.Key{ContainerID: "b", IfName: "eth0"}, IPs: []string{"10.78.0.5/32"}}}
	in, err := BuildInput("node-1", overlay.Config{Device: "estvx4"}, ovl, objs, eps)
	if err == nil || !strings.Contains(err.Error(), "subnet bad") || !strings.Contains(err.Error(), "node node-5") {
		t.Fatalf("error = %v; want one naming subnet bad and node node-5", err)
	}
	if !slices.Equal(in.NodeIPs, []netip.Addr{netip.MustParseAddr("10.77.0.11")}) {
		t.Fatalf("own node addresses = %v, want 10.77.0.11", in.NodeIPs)
	}
	if in.Device != "estvx4" {
		t.Fatalf("config not carried: %+v", in.Config)
	}
	wantSubnets := []overlay.Subnet{{Name: "ov4", CIDR: netip.MustParsePrefix("10.78.0.0/16"), NATOutgoing: true},
		{Name: "ov6", CIDR: netip.MustParsePrefix("fd00:78::/64")}}
	if !slices.Equal(in.Subnets, wantSubnets) {
		t.Fatalf("subnets = %+v, want %+v", in.Subnets, wantSubnets)
	}
	if len(in.ClusterPrefixes) != 3 || in.ClusterPrefixes[2] != netip.MustParsePrefix("192.168.10.0/24") {
		t.Fatalf("cluster prefixes = %v; want the three valid subnets, underlay included", in.ClusterPrefixes)
	}
	if len(in.Remotes) != 2 || in.Remotes[0].Node != "node-2" || in.Remotes[1].Node != "node-3" ||
		in.Remotes[1].VTEP != netip.MustParseAddr("10.77.0.13") || in.Remotes[1].MAC != desired.MustParseMAC("0e:00:00:00:00:03") ||
		len(in.Remotes[1].NodeIPs) != 2 {
		t.Fatalf("remotes = %+v; want node-2 and node-3 (not self, not unpublished, not malformed)", in.Remotes)
	}
	wantPods := []netip.Addr{netip.MustParseAddr("10.78.0.5"), netip.MustParseAddr("10.78.0.9"), netip.MustParseAddr("fd00:78::9")}
	if !slices.Equal(in.LocalPods, wantPods) {
		t.Fatalf("local pods = %v, want %v", in.LocalPods, wantPods)
	}
}

func TestNeighTable(t *testing.T) {
	objs := Objects{
		Nodes: objtest.Ptrs(objtest.Node("node-1", "10.77.0.11", "0e:00:00:00:00:01", "10.77.0.11"),
			objtest.Node("node-2", "10.77.0.12", "0e:00:00:00:00:02", "10.77.0.12")),
		Records: objtest.Records(objtest.Instance("10.78.0.2/32", "node-2", estuaryv1.IPInstanceBound),
			objtest.Instance("10.78.0.3/32", "node-1", estuaryv1.IPInstanceBound),
			objtest.Instance("10.78.0.4/32", "node-2", estuaryv1.IPInstanceRetained),
			objtest.Instance("10.78.0.5/32", "node-9", estuaryv1.IPInstanceBound)),
	}
	got := NeighTable("node-1", objs)
	mac2 := desired.MustParseMAC("0e:00:00:00:00:02")
	want := map[netip.Addr]desired.MAC{netip.MustParseAddr("10.78.0.2"): mac2, netip.MustParseAddr("10.77.0.12"): mac2}
	if len(got) != len(want) {
		t.Fatalf("table = %v, want %v (no local, retained or unknown-node entries)", got, want)
	}
	for ip, m := range want {
		if got[ip] != m {
			t.Fatalf("table[%s] = %s, want %s", ip, got[ip], m)
		}
	}
}

// The overlay input lists every Underlay subnet (VLAN and BGP) with its
// gateway for table 1002, and the answerer resolves underlay pods too.
func TestBuildInputUnderlays(t *testing.T) {
	vlanA := objtest.Subnet("vlan-a", "vlan", "192.168.10.0/24", nil)
	vlanA.Spec.Range.Gateway = "192.168.10.1"
	objs := Objects{
		Networks: []estuaryv1.Network{objtest.Network("overlay", estuaryv1.NetworkTypeOverlay, 4),
			objtest.UnderlayNet("vlan", "", 0, nil), objtest.BGPNet("fabric", 65010, nil, "10.77.0.1")},
		Subnets: []estuaryv1.Subnet{objtest.Subnet("fabric-a", "fabric", "10.90.0.0/24", nil), vlanA,
			objtest.Subnet("ov4", "overlay", "10.78.0.0/16", nil), objtest.Subnet("stray", "nowhere", "10.99.0.0/24", nil)},
		Nodes: objtest.Ptrs(objtest.Node("node-2", "10.77.0.12", "02:00:00:00:00:02", "10.77.0.12")),
		Records: objtest.Records(objtest.Instance("192.168.10.7/24", "node-2", estuaryv1.IPInstanceBound),
			objtest.Instance("10.90.0.9/32", "node-2", estuaryv1.IPInstanceBound)),
	}
	in, err := BuildInput("node-1", overlay.Config{Device: "estvx4"}, objs.Networks[0], objs, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []overlay.Underlay{{CIDR: netip.MustParsePrefix("10.90.0.0/24")},
		{CIDR: netip.MustParsePrefix("192.168.10.0/24"), Gateway: netip.MustParseAddr("192.168.10.1")}}
	if !slices.Equal(in.Underlays, want) {
		t.Errorf("underlays = %+v, want %+v", in.Underlays, want)
	}
	if len(in.Subnets) != 1 || in.Subnets[0].Name != "ov4" {
		t.Errorf("overlay subnets = %+v, want ov4 only", in.Subnets)
	}
	table := NeighTable("node-1", objs)
	mac := desired.MustParseMAC("02:00:00:00:00:02")
	for _, a := range []string{"192.168.10.7", "10.90.0.9"} {
		if got, ok := table[netip.MustParseAddr(a)]; !ok || got != mac {
			t.Errorf("neighbour table[%s] = %v, %v; want node-2's VTEP MAC", a, got, ok)
		}
	}
}

// TestBuildInputSkipsVTEPsOfTheOtherFamily: a node whose tunnel runs over
// the other family (an IPv6-only node beside IPv4 tunnels) is left out of
// the remotes and reported, so the rest of the overlay still applies.
func TestBuildInputSkipsVTEPsOfTheOtherFamily(t *testing.T) {
	ovl := objtest.Network("overlay", estuaryv1.NetworkTypeOverlay, 4)
	objs := Objects{Nodes: objtest.Ptrs(
		objtest.Node("node-2", "10.77.0.12", "0e:00:00:00:00:02", "10.77.0.12", "fd00:77::12"),
		objtest.Node("node-3", "fd00:77::13", "0e:00:00:00:00:03", "fd00:77::13"),
	)}
	for _, c := range []struct {
		local, keep, skip string
	}{{"10.77.0.11", "node-2", "node-3"}, {"fd00:77::11", "node-3", "node-2"}} {
		cfg := overlay.Config{Device: "estvx4", LocalIP: netip.MustParseAddr(c.local)}
		in, err := BuildInput("node-1", cfg, ovl, objs, nil)
		if err == nil || !strings.Contains(err.Error(), "node "+c.skip) || !strings.Contains(err.Error(), "not of the family") {
			t.Errorf("local %s: error = %v; want one naming node %s", c.local, err, c.skip)
		}
		if len(in.Remotes) != 1 || in.Remotes[0].Node != c.keep {
			t.Errorf("local %s: remotes = %+v; want %s only", c.local, in.Remotes, c.keep)
		}
	}
}
