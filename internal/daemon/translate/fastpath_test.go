package translate

import (
	"net/netip"
	"slices"
	"testing"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/fastpath"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

func TestFastPathDesired(t *testing.T) {
	no := false
	objs := Objects{
		Networks: []estuaryv1.Network{objtest.Network("ovl", estuaryv1.NetworkTypeOverlay, 4), objtest.Network("rack", estuaryv1.NetworkTypeUnderlay, 0)},
		Subnets: []estuaryv1.Subnet{
			objtest.Subnet("o4", "ovl", "10.78.0.0/16", nil), objtest.Subnet("o6", "ovl", "fd00:78::1/64", &no),
			objtest.Subnet("u4", "rack", "10.77.100.0/24", nil), objtest.Subnet("bad", "ovl", "10.1.0.0/99", nil),
		},
	}
	eps := []endpointstore.Endpoint{
		{Key: endpointstore.Key{ContainerID: "c1", IfName: "eth0"}},
		{Key: endpointstore.Key{ContainerID: "c2", IfName: "eth0"}, Shaped: true},
	}
	d := FastPathDesired(objs, eps, func(k endpointstore.Key) string { return "est-" + k.ContainerID })
	if !slices.Equal(d.Pods, []string{"est-c1"}) {
		t.Errorf("pods %v, want [est-c1] (the shaped pod c2 left out)", d.Pods)
	}
	want := []fastpath.Subnet{
		{CIDR: netip.MustParsePrefix("10.78.0.0/16"), NATOutgoing: true},
		{CIDR: netip.MustParsePrefix("fd00:78::/64"), NATOutgoing: false},
		{CIDR: netip.MustParsePrefix("10.77.100.0/24"), NATOutgoing: false},
	}
	if !slices.Equal(d.Subnets, want) {
		t.Errorf("subnets %v, want %v (overlay natOutgoing by default, underlay not, the malformed one left out)", d.Subnets, want)
	}
}

func TestFastPathTunnel(t *testing.T) {
	mac := func(s string) desired.MAC {
		m, err := desired.ParseMAC(s)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	cfg := overlay.Config{Device: "estvx4", VNI: 4, Parent: "eth0", LocalIP: netip.MustParseAddr("172.18.0.11"),
		MTU: 1450, MAC: mac("0e:00:00:00:00:01")}
	objs := Objects{Nodes: objtest.Ptrs(
		objtest.Node("node-1", "172.18.0.11", "0e:00:00:00:00:01"),
		objtest.Node("node-2", "172.18.0.12", "0e:00:00:00:00:02"),
		objtest.Node("node-3", "", ""),
		objtest.Node("node-4", "not-an-ip", "0e:00:00:00:00:04"),
	)}
	in, _ := BuildInput("node-1", cfg, objtest.Network("ovl", estuaryv1.NetworkTypeOverlay, 4), objs, nil)
	in.Remotes = append(in.Remotes, overlay.Remote{Node: "node-1-again", VTEP: cfg.LocalIP, MAC: cfg.MAC})
	tun, vteps := FastPathTunnel(in)
	wantTun := fastpath.TunnelDevice{Device: "estvx4", Parent: "eth0", VNI: 4, Port: overlay.DefaultPort,
		Local: cfg.LocalIP, MAC: cfg.MAC, MTU: 1450}
	if tun == nil || *tun != wantTun {
		t.Errorf("tunnel %+v, want %+v (the device's settings, the default port)", tun, wantTun)
	}
	wantVTEPs := []fastpath.VTEP{{MAC: mac("0e:00:00:00:00:02"), IP: netip.MustParseAddr("172.18.0.12")}}
	if !slices.Equal(vteps, wantVTEPs) {
		t.Errorf("vteps %v, want %v (other nodes that published a valid endpoint, not this node's own)", vteps, wantVTEPs)
	}
}
