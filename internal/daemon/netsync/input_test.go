package netsync

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/cniserver/store"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
)

func network(name string, typ estuaryv1.NetworkType, netID int64) estuaryv1.Network {
	return estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.NetworkSpec{Type: typ, NetID: &netID}}
}

func subnet(name, net, cidr string, nat *bool) estuaryv1.Subnet {
	return estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.SubnetSpec{Network: net, Range: estuaryv1.AddressRange{CIDR: cidr}, NATOutgoing: nat}}
}

func node(name, vtepIP, vtepMAC string, internal ...string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
	if vtepIP != "" {
		n.Annotations[estuaryv1.AnnotationVTEPIP] = vtepIP
		n.Annotations[estuaryv1.AnnotationVTEPMAC] = vtepMAC
	}
	for _, a := range internal {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: name})
	return n
}

func instance(ip, nodeName string, phase estuaryv1.IPInstancePhase) estuaryv1.IPInstance {
	return estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{Name: ip, Labels: map[string]string{estuaryv1.LabelNode: nodeName}},
		Spec:       estuaryv1.IPInstanceSpec{Address: estuaryv1.InstanceAddress{IP: ip}},
		Status:     estuaryv1.IPInstanceStatus{Phase: phase},
	}
}

func TestBuildInput(t *testing.T) {
	no := false
	ovl := network("overlay", estuaryv1.NetworkTypeOverlay, 4)
	objs := Objects{
		Subnets: []estuaryv1.Subnet{subnet("ov4", "overlay", "10.78.0.0/16", nil), subnet("ov6", "overlay", "fd00:78::/64", &no),
			subnet("rack1", "underlay", "192.168.10.0/24", nil), subnet("bad", "overlay", "10.1.0.0/33", nil)},
		Nodes: []corev1.Node{node("node-1", "10.77.0.11", "0e:00:00:00:00:01", "10.77.0.11"),
			node("node-3", "10.77.0.13", "0e:00:00:00:00:03", "10.77.0.13", "fd00:77::13"),
			node("node-2", "10.77.0.12", "0e:00:00:00:00:02", "10.77.0.12"), node("node-4", "", ""),
			node("node-5", "10.77.0.15", "not-a-mac")},
	}
	eps := []store.Endpoint{{Key: store.Key{ContainerID: "a", IfName: "eth0"}, IPs: []string{"10.78.0.9/32", "fd00:78::9/128"}},
		{Key: store.Key{ContainerID: "b", IfName: "eth0"}, IPs: []string{"10.78.0.5/32"}}}
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
		in.Remotes[1].VTEP != netip.MustParseAddr("10.77.0.13") || in.Remotes[1].MAC != state.MustParseMAC("0e:00:00:00:00:03") ||
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
		Nodes: []corev1.Node{node("node-1", "10.77.0.11", "0e:00:00:00:00:01", "10.77.0.11"),
			node("node-2", "10.77.0.12", "0e:00:00:00:00:02", "10.77.0.12")},
		IPInstances: []estuaryv1.IPInstance{instance("10.78.0.2/32", "node-2", estuaryv1.IPInstanceBound),
			instance("10.78.0.3/32", "node-1", estuaryv1.IPInstanceBound),
			instance("10.78.0.4/32", "node-2", estuaryv1.IPInstanceRetained),
			instance("10.78.0.5/32", "node-9", estuaryv1.IPInstanceBound)},
	}
	got := NeighTable("node-1", objs)
	mac2 := state.MustParseMAC("0e:00:00:00:00:02")
	want := map[netip.Addr]state.MAC{netip.MustParseAddr("10.78.0.2"): mac2, netip.MustParseAddr("10.77.0.12"): mac2}
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
	vlanA := subnet("vlan-a", "vlan", "192.168.10.0/24", nil)
	vlanA.Spec.Range.Gateway = "192.168.10.1"
	objs := Objects{
		Networks: []estuaryv1.Network{network("overlay", estuaryv1.NetworkTypeOverlay, 4),
			underlayNet("vlan", "", 0, nil), bgpNet("fabric", 65010, nil, "10.77.0.1")},
		Subnets: []estuaryv1.Subnet{subnet("fabric-a", "fabric", "10.90.0.0/24", nil), vlanA,
			subnet("ov4", "overlay", "10.78.0.0/16", nil), subnet("stray", "nowhere", "10.99.0.0/24", nil)},
		Nodes: []corev1.Node{node("node-2", "10.77.0.12", "02:00:00:00:00:02", "10.77.0.12")},
		IPInstances: []estuaryv1.IPInstance{instance("192.168.10.7/24", "node-2", estuaryv1.IPInstanceBound),
			instance("10.90.0.9/32", "node-2", estuaryv1.IPInstanceBound)},
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
	mac := state.MustParseMAC("02:00:00:00:00:02")
	for _, a := range []string{"192.168.10.7", "10.90.0.9"} {
		if got, ok := table[netip.MustParseAddr(a)]; !ok || got != mac {
			t.Errorf("neighbour table[%s] = %v, %v; want node-2's VTEP MAC", a, got, ok)
		}
	}
}
