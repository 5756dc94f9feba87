package underlay

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// bgpInput is one BGP network with a v4 and a v6 subnet on uplink eth0,
// which holds 10.77.0.11/24 and fd77::11/64.
func bgpInput(peers ...string) Input {
	n := Network{Name: "fabric", Mode: ModeBGP, VLAN: 65010, Subnets: []Subnet{
		{Name: "fabric-a", CIDR: pfx("10.90.0.0/24"), Gateway: ip("10.90.0.1"), NATOutgoing: true,
			LocalPods: []netip.Addr{ip("10.90.0.9")}},
		{Name: "fabric-6", CIDR: pfx("fd90::/64"), LocalPods: []netip.Addr{ip("fd90::9")}},
		{Name: "fabric-empty", CIDR: pfx("10.91.0.0/24")},
	}}
	for _, p := range peers {
		n.Peers = append(n.Peers, ip(p))
	}
	return Input{
		Uplink:   "eth0",
		Networks: []Network{n},
		Cluster: []SubnetRef{{Name: "fabric-a", CIDR: pfx("10.90.0.0/24"), Created: t0},
			{Name: "fabric-6", CIDR: pfx("fd90::/64"), Created: t0}, {Name: "fabric-empty", CIDR: pfx("10.91.0.0/24"), Created: t0}},
		NodeAddrs: []desired.Addr{
			{Dev: "eth0", Prefix: pfx("10.77.0.11/24")}, {Dev: "eth0", Prefix: pfx("fd77::11/64")},
			{Dev: "eth1", Prefix: pfx("10.50.0.11/24")},
		},
	}
}

func TestDesiredBGP(t *testing.T) {
	// 10.50.0.1 is on another link, 10.60.0.1 nowhere: the first reachable
	// peer of each family is the subnets' next hop.
	in := bgpInput("10.50.0.1", "10.60.0.1", "10.77.0.1", "10.77.0.2", "fd77::1")
	slots := Numbering(in.Cluster)
	t4, t6 := desired.TableUnderlayFirst+slots["fabric-a"], desired.TableUnderlayFirst+slots["fabric-6"]
	want := desired.State{
		Rules: []desired.Rule{{Priority: t4, Table: t4, Src: pfx("10.90.0.0/24")}, {Priority: t6, Table: t6, Src: pfx("fd90::/64")}},
		Routes: []desired.Route{
			{Table: t4, Dst: pfx("0.0.0.0/0"), Gw: ip("10.77.0.1"), Dev: "eth0", Protocol: desired.ProtocolEstuary},
			{Table: t6, Dst: pfx("::/0"), Gw: ip("fd77::1"), Dev: "eth0", Protocol: desired.ProtocolEstuary},
		},
	}
	if t4 > t6 {
		want.Rules[0], want.Rules[1] = want.Rules[1], want.Rules[0]
		want.Routes[0], want.Routes[1] = want.Routes[1], want.Routes[0]
	}
	got := Desired(in)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Desired =\n%+v\nwant\n%+v", got, want)
	}
	if len(got.Neighs) != 0 || len(got.Addrs) != 0 || len(Hidden(in)) != 0 {
		t.Errorf("BGP subnets got proxy neighbours, enhanced addresses or hidden routes: %+v", got)
	}
	if d := Devices(in); !reflect.DeepEqual(d, []Device{{Name: "eth0", V4: true, V6: true}}) {
		t.Errorf("Devices = %+v; want the uplink itself, whatever the netID", d)
	}
	if p := Problems(in); len(p) != 0 {
		t.Errorf("Problems = %v", p)
	}
	if n := NATSources(in); len(n) != 1 || n[0] != pfx("10.90.0.0/24") {
		t.Errorf("NATSources = %v; want the BGP subnet with natOutgoing", n)
	}
}

func TestDesiredBGPNoReachablePeer(t *testing.T) {
	for _, in := range []Input{bgpInput("10.50.0.1", "fd77::1"), bgpInput()} {
		got := Desired(in)
		for _, r := range got.Rules {
			if r.Src.Addr().Is4() {
				t.Errorf("rule %s without a reachable IPv4 peer", r)
			}
		}
		probs := Problems(in)
		if len(probs) == 0 || !strings.Contains(probs[0].Error(), "no BGP peer") {
			t.Errorf("Problems = %v; want the subnet without a reachable peer reported", probs)
		}
	}
	// A node address without its prefix length (/32) reaches no peer.
	in := bgpInput("10.77.0.1")
	in.NodeAddrs = []desired.Addr{{Dev: "eth0", Prefix: pfx("10.77.0.11/32")}}
	if got := Desired(in); len(got.Rules) != 0 {
		t.Errorf("Desired = %+v; want nothing without the uplink's prefix", got)
	}
}

// A VLAN and a BGP network side by side: each subnet keeps its own mode.
func TestDesiredVLANAndBGP(t *testing.T) {
	in := bgpInput("10.77.0.1")
	vl := oneSubnet(0, "192.168.60.5")
	in.Networks = append(in.Networks, vl.Networks...)
	in.Cluster = append(in.Cluster, vl.Cluster...)
	got := Desired(in)
	var onLink, viaPeer int
	for _, r := range got.Routes {
		switch {
		case r.Gw == ip("10.77.0.1"):
			viaPeer++
		case r.Dst == pfx("192.168.60.0/24"):
			onLink++
		}
	}
	if onLink != 1 || viaPeer != 1 || len(got.Neighs) != 1 || len(got.Addrs) != 1 {
		t.Errorf("Desired = %+v; want the VLAN subnet's on-link route, proxy entry and enhanced address, "+
			"and the BGP subnet's route via its peer", got)
	}
}
