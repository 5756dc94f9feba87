package underlay

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// TestBGPUplinkApartFromVLAN: with BGPUplink set, a BGP subnet's default
// route leaves by that link, through a peer on its networks (a peer on the
// VLAN uplink's networks is not its next hop), while a VLAN subnet keeps
// Uplink; each device is made on its own uplink.
func TestBGPUplinkApartFromVLAN(t *testing.T) {
	in := bgpInput("10.77.0.1", "10.50.0.1")
	in.Uplink, in.BGPUplink = "bond0", "eth1"
	in.Networks[0].Subnets = in.Networks[0].Subnets[:1]
	in.Networks = append(in.Networks, Network{Name: "rack", Mode: ModeVLAN, VLAN: 20, Subnets: []Subnet{
		{Name: "rack-a", CIDR: pfx("10.20.0.0/24"), Gateway: ip("10.20.0.1"), LocalPods: []netip.Addr{ip("10.20.0.9")}},
	}})
	in.Cluster = append(in.Cluster, SubnetRef{Name: "rack-a", CIDR: pfx("10.20.0.0/24"), Created: t0})
	got := Desired(in)
	var bgpRoute *desired.Route
	for i, r := range got.Routes {
		if r.Dst == pfx("0.0.0.0/0") && r.Gw.IsValid() && r.Table == desired.TableUnderlayFirst+Numbering(in.Cluster)["fabric-a"] {
			bgpRoute = &got.Routes[i]
		}
	}
	if bgpRoute == nil || bgpRoute.Dev != "eth1" || bgpRoute.Gw != ip("10.50.0.1") {
		t.Fatalf("BGP subnet's default route %+v; want via 10.50.0.1 dev eth1 (routes %+v)", bgpRoute, got.Routes)
	}
	want := []Device{{Name: "bond0.20", VLAN: 20, V4: true}, {Name: "eth1", V4: true}}
	if d := Devices(in); !reflect.DeepEqual(d, want) {
		t.Fatalf("Devices = %+v, want %+v", d, want)
	}
	for _, d := range want {
		if p, wantP := in.parentOf(d), map[string]string{"bond0.20": "bond0", "eth1": "eth1"}[d.Name]; p != wantP {
			t.Errorf("device %s made on %s, want %s", d.Name, p, wantP)
		}
	}
	if p := Problems(in); len(p) != 0 {
		t.Errorf("Problems = %v", p)
	}
}
