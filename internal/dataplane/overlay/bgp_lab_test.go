package overlay

import (
	"context"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/nstest/nspod"
)

// bgpLab is one node of a BGP underlay network, its peer (the fabric's
// router, which routes the pod's /32 back to the node as if it had learned
// it by BGP) and an external host behind the peer.
//
//	pod 10.90.0.9 -- node eth0 10.77.0.11/24 -- switch -- peer 10.77.0.1 | 10.200.0.1 -- ext 10.200.0.10
//
// The node's own default route points at an address nobody holds, so only
// the subnet's table reaches the outside.
type bgpLab struct {
	node, peer, ext, pod string
}

var (
	bgpSubnet = netip.MustParsePrefix("10.90.0.0/24")
	bgpPod    = netip.MustParseAddr("10.90.0.9")
	bgpNode   = netip.MustParseAddr("10.77.0.11")
	bgpPeer   = netip.MustParseAddr("10.77.0.1")
	bgpExt    = netip.MustParseAddr("10.200.0.10")
)

func newBGPLab(t *testing.T) *bgpLab {
	t.Helper()
	sw := nstest.NewSwitch(t)
	l := &bgpLab{node: nstest.New(t), peer: nstest.New(t), ext: nstest.New(t)}
	nstest.Plug(t, sw, l.node, "node", bgpNode.String()+"/24")
	nstest.IP(t, l.node, "route", "add", "default", "via", "10.77.0.254")
	nstest.Plug(t, sw, l.peer, "peer", bgpPeer.String()+"/24")
	nstest.IP(t, l.peer, "link", "add", "eth1", "type", "veth", "peer", "name", "eth0", "netns", filepath.Base(l.ext))
	nstest.IP(t, l.peer, "addr", "add", "10.200.0.1/24", "dev", "eth1")
	nstest.IP(t, l.peer, "link", "set", "eth1", "up")
	nstest.IP(t, l.peer, "route", "add", bgpPod.String()+"/32", "via", bgpNode.String())
	nstest.Exec(t, l.peer, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	nstest.IP(t, l.ext, "link", "set", "lo", "up")
	nstest.IP(t, l.ext, "addr", "add", bgpExt.String()+"/24", "dev", "eth0")
	nstest.IP(t, l.ext, "link", "set", "eth0", "up")
	nstest.IP(t, l.ext, "route", "add", "default", "via", "10.200.0.1")
	l.pod, _ = nspod.Plumb(t, l.node, "bgp", bgpPod)
	return l
}

// TestBGPSubnetTableAndNAT: a BGP subnet's pods leave through their own
// table via the network's first peer on the uplink, unNATed by default;
// with natOutgoing they are masqueraded to the node's address by the
// overlay's NAT table, except for packets carrying kube-proxy's mark.
func TestBGPSubnetTableAndNAT(t *testing.T) {
	l := newBGPLab(t)
	ua, err := underlay.NewAgent(l.node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ua.Close)
	uin := underlay.Input{
		Uplink: "eth0",
		Networks: []underlay.Network{{Name: "fabric", Mode: underlay.ModeBGP, VLAN: 65010,
			Peers: []netip.Addr{netip.MustParseAddr("10.60.0.1"), bgpPeer, netip.MustParseAddr("10.77.0.2")},
			Subnets: []underlay.Subnet{{Name: "fabric-a", CIDR: bgpSubnet, NATOutgoing: true,
				LocalPods: []netip.Addr{bgpPod}}}}},
		Cluster:   []underlay.SubnetRef{{Name: "fabric-a", CIDR: bgpSubnet, Created: time.Unix(1, 0)}},
		NodeAddrs: []desired.Addr{{Dev: "eth0", Prefix: netip.PrefixFrom(bgpNode, 24)}},
	}
	for i := range 2 {
		plan, err := ua.Apply(context.Background(), uin)
		if err != nil {
			t.Fatalf("underlay Apply: %v", err)
		}
		if i == 1 && !plan.Empty() {
			t.Errorf("second Apply changed:\n%s", plan)
		}
	}
	table := desired.TableUnderlayFirst + underlay.Numbering(uin.Cluster)["fabric-a"]
	tbl := strings.TrimSpace(nstest.IP(t, l.node, "route", "show", "table", strconv.Itoa(table)))
	if tbl != "default via "+bgpPeer.String()+" dev eth0 proto 229" {
		t.Errorf("table %d = %q, want only the default route via the first peer on eth0", table, tbl)
	}
	if rules := nstest.IP(t, l.node, "rule", "show"); !strings.Contains(rules, "from "+bgpSubnet.String()+" lookup "+strconv.Itoa(table)) {
		t.Errorf("no rule from %s to table %d:\n%s", bgpSubnet, table, rules)
	}
	if px := nstest.IP(t, l.node, "neigh", "show", "proxy"); strings.Contains(px, "dev eth0") {
		t.Errorf("proxy neighbours on the uplink of a BGP subnet:\n%s", px)
	}
	if ad := nstest.IP(t, l.node, "addr", "show", "dev", "eth0"); strings.Contains(ad, bgpPod.String()) {
		t.Errorf("enhanced address on the uplink of a BGP subnet:\n%s", ad)
	}
	wantPeer(t, "BGP pod -> external, no NAT by default", l.pod, bgpExt, l.ext, bgpPod)

	agent, err := NewAgent(l.node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)
	in := Input{
		Config: Config{Device: DeviceName(netID), VNI: netID, Parent: "eth0", LocalIP: bgpNode,
			MTU: 1450, MAC: StableMAC("bgp-node")},
		LocalPods:       []netip.Addr{bgpPod},
		Subnets:         []Subnet{{Name: "pods4", CIDR: subnet4}},
		ClusterPrefixes: []netip.Prefix{subnet4, bgpSubnet},
		UnderlayNAT:     underlay.NATSources(uin),
		KubeProxyMark:   1 << 12,
	}
	if _, err := agent.Apply(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	nft := nstest.Exec(t, l.node, "nft", "list", "table", "ip", "estuary")
	for _, want := range []string{"meta mark & 0x00001000 == 0x00001000 return", bgpSubnet.String()} {
		if !strings.Contains(nft, want) {
			t.Errorf("nft table lacks %q:\n%s", want, nft)
		}
	}
	if strings.Index(nft, "return") > strings.Index(nft, "masquerade") {
		t.Errorf("kube-proxy's mark is not returned before estuary's masquerade:\n%s", nft)
	}
	wantPeer(t, "BGP pod -> external, natOutgoing", l.pod, bgpExt, l.ext, bgpNode)

	// Packets kube-proxy marked for its own masquerade are left to it.
	nstest.Exec(t, l.node, "nft", "add", "table", "ip", "esttest-mark")
	nstest.Exec(t, l.node, "nft", "add", "chain", "ip", "esttest-mark", "c", "{ type filter hook prerouting priority -150; }")
	nstest.Exec(t, l.node, "nft", "add", "rule", "ip", "esttest-mark", "c", "ip", "saddr", bgpPod.String(),
		"meta", "mark", "set", "meta", "mark", "or", "0x1000")
	wantPeer(t, "BGP pod -> external, kube-proxy's mark", l.pod, bgpExt, l.ext, bgpPod)
}
