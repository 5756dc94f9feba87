//go:build lab

package e2e_test

// Dual-stack underlay on the dual lab: an untagged VLAN network and a BGP
// network, each with an IPv4 and an IPv6 subnet, and pods taking one address
// of each. The networks, subnets and domain labels are this file's own
// (ds-...), and each subnet hands out a slice of its CIDR (.210-.239) that
// the IPv4 underlay tests do not use, so a leftover record of theirs cannot
// collide. Packets are real HTTP exchanges whose /clientip proves the
// addresses were not translated; the IPv6 neighbour and route checks read
// the router's own tables (ip -6 neigh, birdc, ip -6 route), which is what
// the segment and the fabric would use.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/test/infra/lab"
	"github.com/estuary-cni/estuary/test/infra/lab/render"
)

// The dual-stack underlay networks, their subnets and domain labels.
const (
	dsRackNetwork = "ds-rack"
	dsRackLabel   = "estuary-e2e/ds-rack"
	dsBGPNetwork  = "ds-as64600"
	dsBGPLabel    = "estuary-e2e/ds-bgp"
	// dsFirst..dsLast are the host numbers of a subnet's pod addresses.
	dsFirst, dsLast = 0x210, 0x239
	// dsExternalPort is where the external host serves /clientip on its
	// IPv6 address, apart from the IPv4 tests' externalPort.
	dsExternalPort = 8086
)

// dsSubnet is a subnet of network over cidr whose pods take the addresses
// dsFirst..dsLast (read as decimal for IPv4: .210-.239); gw "" means none.
func dsSubnet(name, network, cidr, gw string) *estuaryv1.Subnet {
	p := netip.MustParsePrefix(cidr)
	first, last := dsFirst, dsLast
	version := 6
	if p.Addr().Is4() {
		first, last, version = 210, 239, 4
	}
	return &estuaryv1.Subnet{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.SubnetSpec{Network: network, Range: estuaryv1.AddressRange{
			Version: int32(version), CIDR: p.String(), Gateway: estuaryv1.IPAddress(gw),
			Start: estuaryv1.IPAddress(nthAddr(p, first).String()), End: estuaryv1.IPAddress(nthAddr(p, last).String()),
		}},
	}
}

// createDualNetwork creates nw and its subnets, deleted (subnets first,
// waiting until each is gone) when the test ends.
func (e *labEnv) createDualNetwork(t *testing.T, nw *estuaryv1.Network, subnets ...*estuaryv1.Subnet) {
	t.Helper()
	objs := []client.Object{nw}
	for _, sn := range subnets {
		objs = append(objs, sn)
	}
	for _, o := range objs {
		t.Cleanup(func() { e.deleteAndWait(t, o) })
		if err := e.c.Create(testCtx(t, time.Minute), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

// dualPod is a netexec pod of network on node asking for both families.
func dualPod(name, node, network string) *corev1.Pod {
	p := netexecPod(name, node, nil)
	p.Annotations = map[string]string{estuaryv1.AnnotationNetwork: network, estuaryv1.AnnotationIPFamily: estuaryv1.IPFamilyDualStack}
	return p
}

// checkReachedFrom: an HTTP /clientip request from nsPath to addr is
// answered and the pod saw the client as want (no address translation).
func checkReachedFrom(t *testing.T, what, nsPath, addr, want string) {
	t.Helper()
	u := fmt.Sprintf("http://%s/clientip", net.JoinHostPort(addr, fmt.Sprint(httpPort)))
	var seen string
	eventually(t, what+": GET "+u, reachTimeout, func(ctx context.Context) error {
		var err error
		seen, err = httpGet(ctx, nsPath, u)
		return err
	})
	if hostOf(seen) != want {
		t.Errorf("%s: %s saw the client as %s, want %s", what, addr, seen, want)
	}
}

// linkMAC is the hardware address of link in the network namespace at nsPath.
func linkMAC(t *testing.T, nsPath, link string) string {
	t.Helper()
	out, err := exec.Command("nsenter", "--net="+nsPath, "ip", "-j", "link", "show", link).Output()
	if err != nil {
		t.Fatalf("ip link show %s in %s: %v", link, nsPath, err)
	}
	var links []struct {
		Address string `json:"address"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip link show %s in %s: %q: %v", link, nsPath, out, err)
	}
	return links[0].Address
}

// routerNeigh6 is the router's neighbour entry for addr on its switch port:
// the link-layer address and state, "" when it has none.
func (e *labEnv) routerNeigh6(ctx context.Context, addr string) (mac, state string, err error) {
	out, err := e.run(ctx, "router", "ip", "-j", "-6", "neigh", "show", addr, "dev", "eth0")
	if err != nil {
		return "", "", err
	}
	var ns []struct {
		LLAddr string   `json:"lladdr"`
		State  []string `json:"state"`
	}
	if err := json.Unmarshal([]byte(out), &ns); err != nil {
		return "", "", fmt.Errorf("parse the router's neighbour %s: %w (%q)", addr, err, out)
	}
	if len(ns) == 0 {
		return "", "", nil
	}
	return ns[0].LLAddr, strings.Join(ns[0].State, ","), nil
}

// routerDrops6Between makes the router drop every IPv6 packet from and to
// cidr it would forward, until the test ends, and returns a reader of how
// many it dropped.
func (e *labEnv) routerDrops6Between(t *testing.T, cidr string) func() int {
	t.Helper()
	const table = "estuary_e2e_ds6"
	rules := fmt.Sprintf("table ip6 %s {\n chain forward {\n  type filter hook forward priority -10; policy accept;\n"+
		"  ip6 saddr %s ip6 daddr %s counter drop\n }\n}\n", table, cidr, cidr)
	if _, err := e.exec(testCtx(t, time.Minute), "router", nil, rules, "nft", "-f", "-"); err != nil {
		t.Fatalf("router: drop IPv6 packets within %s: %v", cidr, err)
	}
	t.Cleanup(func() { _, _ = e.run(context.Background(), "router", "nft", "delete", "table", "ip6", table) })
	return func() int {
		out, err := e.run(testCtx(t, time.Minute), "router", "nft", "list", "table", "ip6", table)
		if err != nil {
			t.Fatal(err)
		}
		var n, bytes int
		for _, l := range strings.Split(out, "\n") {
			if _, after, ok := strings.Cut(l, "counter packets "); ok {
				if _, err := fmt.Sscanf(after, "%d bytes %d", &n, &bytes); err == nil {
					return n
				}
			}
		}
		t.Fatalf("no counter in the router's nft table %s: %s", table, out)
		return 0
	}
}

// TestDualStackUnderlayUntagged: an untagged VLAN underlay network with an
// IPv4 subnet (10.77.100.0/24) and an IPv6 subnet (fd77:100::/64), both
// routed by the lab router, gives pods on node-1 and node-2 one address of
// each; the router resolves each pod's IPv6 address to the MAC of the pod's
// node (proxy NDP); the external host reaches each pod's IPv6 (and IPv4)
// address and the pod sees the external host's own address; the pod reaches
// the external host with its own IPv6 address; the two pods reach each other
// over IPv6 across nodes on the switch, without the router.
func TestDualStackUnderlayUntagged(t *testing.T) {
	e := needFamily(t, "dual")
	v6 := e.ipv6(t)
	nodes := []string{"node-1", "node-2"}
	e.labelNodes(t, dsRackLabel, dsRackNetwork, nodes...)
	nw := &estuaryv1.Network{
		ObjectMeta: metav1.ObjectMeta{Name: dsRackNetwork},
		Spec: estuaryv1.NetworkSpec{
			Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeVLAN, NetID: ptr.To[int64](0),
			NodeSelector: map[string]string{dsRackLabel: dsRackNetwork},
		},
	}
	sn4 := dsSubnet(dsRackNetwork+"-v4", dsRackNetwork, lab.UnderlayCIDR, nthAddr(netip.MustParsePrefix(lab.UnderlayCIDR), 1).String())
	sn6 := dsSubnet(dsRackNetwork+"-v6", dsRackNetwork, v6.Underlay, v6.UnderlayGateway)
	e.createDualNetwork(t, nw, sn4, sn6)
	cidr4, cidr6 := netip.MustParsePrefix(sn4.Spec.Range.CIDR), netip.MustParsePrefix(sn6.Spec.Range.CIDR)

	ns := e.newNamespace(t, "ds-underlay")
	e.mustCreate(t, ns, dualPod("under-a", nodes[0], dsRackNetwork), dualPod("under-b", nodes[1], dsRackNetwork))
	pods := e.waitPods(t, ns, "under-a", "under-b")
	a, b := pods["under-a"], pods["under-b"]
	aa, ba := podFamilies(t, &a, cidr4, cidr6), podFamilies(t, &b, cidr4, cidr6)
	a4, a6, b4, b6 := aa.v4, aa.v6, ba.v4, ba.v6
	e.checkRecordsBySubnet(t, &a, map[string]string{sn4.Name: a4, sn6.Name: a6})
	e.checkRecordsBySubnet(t, &b, map[string]string{sn4.Name: b4, sn6.Name: b6})
	aNS, bNS := e.podNetns(t, &a), e.podNetns(t, &b)

	t.Run("external host reaches each pod's IPv6 address without NAT", func(t *testing.T) {
		checkReachedFrom(t, "external -> "+a.Name, e.externalNetns, a6, v6.External)
		checkReachedFrom(t, "external -> "+b.Name, e.externalNetns, b6, v6.External)
	})

	t.Run("the pod's node answers the router's NDP for the pod", func(t *testing.T) {
		for _, p := range []struct {
			pod  *corev1.Pod
			addr string
		}{{&a, a6}, {&b, b6}} {
			want := linkMAC(t, e.nodeNetns[p.pod.Spec.NodeName], "eth0")
			eventually(t, fmt.Sprintf("the router resolves %s (pod %s) to %s's MAC %s", p.addr, p.pod.Name, p.pod.Spec.NodeName, want), time.Minute,
				func(ctx context.Context) error {
					mac, state, err := e.routerNeigh6(ctx, p.addr)
					if err != nil {
						return err
					}
					if mac != want || strings.Contains(state, "FAILED") || strings.Contains(state, "INCOMPLETE") {
						return fmt.Errorf("neighbour %s lladdr %q state %s", p.addr, mac, state)
					}
					return nil
				})
		}
	})

	t.Run("external host reaches each pod's IPv4 address without NAT", func(t *testing.T) {
		checkReachedFrom(t, "external -> "+a.Name, e.externalNetns, a4, e.externalAddr)
		checkReachedFrom(t, "external -> "+b.Name, e.externalNetns, b4, e.externalAddr)
	})

	t.Run("pod reaches the external host with its own IPv6 address", func(t *testing.T) {
		serveClientIP(t, e.externalNetns, net.JoinHostPort(v6.External, fmt.Sprint(dsExternalPort)))
		checkClientIPFrom(t, a.Name+" -> external", aNS, v6.External, dsExternalPort, a6)
		checkClientIPFrom(t, b.Name+" -> external", bNS, v6.External, dsExternalPort, b6)
	})

	t.Run("pods reach each other over IPv6 across nodes on the switch, not through the router", func(t *testing.T) {
		dropped := e.routerDrops6Between(t, cidr6.String())
		checkClientIPFrom(t, a.Name+" -> "+b.Name, aNS, b6, httpPort, a6)
		checkClientIPFrom(t, b.Name+" -> "+a.Name, bNS, a6, httpPort, b6)
		if n := dropped(); n != 0 {
			t.Errorf("the router forwarded (and dropped) %d packets within %s: pod-to-pod traffic went through it", n, cidr6)
		}
	})
}

// birdRoute is what the lab router's bird holds for prefix (exact match):
// `birdc show route <prefix> all`, "" when it has no such route ("Network
// not found").
func (e *labEnv) birdRoute(ctx context.Context, prefix string) (string, error) {
	sock := lab.Paths{Root: e.state}.Router() + "/bird.ctl"
	out, err := exec.CommandContext(ctx, "birdc", "-s", sock, "show", "route", prefix, "all").CombinedOutput()
	if strings.Contains(string(out), "Network not found") { // birdc exits 1 then
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("birdc show route %s all: %w: %s", prefix, err, out)
	}
	if !strings.Contains(string(out), prefix) {
		return "", fmt.Errorf("birdc show route %s all: no such route and no \"Network not found\": %s", prefix, out)
	}
	return string(out), nil
}

// routerRoute6 is the gateway of the router's kernel route to dst/128 that
// bird installed from BGP, "" when there is none.
func (e *labEnv) routerRoute6(ctx context.Context, dst string) (string, error) {
	out, err := e.run(ctx, "router", "ip", "-j", "-6", "route", "show", dst+"/128", "proto", "bird")
	if err != nil {
		return "", err
	}
	var routes []struct {
		Gateway string `json:"gateway"`
	}
	if err := json.Unmarshal([]byte(out), &routes); err != nil {
		return "", fmt.Errorf("parse the router's routes to %s: %w (%q)", dst, err, out)
	}
	if len(routes) == 0 {
		return "", nil
	}
	return routes[0].Gateway, nil
}

// waitRouter128 waits until bird has dst/128 from node's session with next
// hop nextHop and the router's kernel routes it there; with node "", until
// neither has a route to dst/128.
func (e *labEnv) waitRouter128(t *testing.T, dst, node, nextHop string) {
	t.Helper()
	prefix := dst + "/128"
	what := fmt.Sprintf("the router learns %s from %s (session %s) via %s", prefix, node, render.BirdProtocol(node), nextHop)
	if node == "" {
		what = fmt.Sprintf("the router has no route to %s", prefix)
	}
	var last string
	err := waitFor(what, 2*time.Minute, func(ctx context.Context) error {
		route, err := e.birdRoute(ctx, prefix)
		if err != nil {
			return err
		}
		gw, err := e.routerRoute6(ctx, dst)
		if err != nil {
			return err
		}
		last = route
		if node == "" {
			if route != "" || gw != "" {
				return fmt.Errorf("bird still has it (kernel route via %q)", gw)
			}
			return nil
		}
		if !strings.Contains(route, "["+render.BirdProtocol(node)+" ") || !strings.Contains(route, "via "+nextHop+" ") {
			return fmt.Errorf("bird has no route from %s via %s", render.BirdProtocol(node), nextHop)
		}
		if gw != nextHop {
			return fmt.Errorf("kernel route via %q", gw)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("%v\nbirdc show route %s all:\n%s", err, prefix, last)
	}
}

// TestDualStackBGP: a BGP underlay network (the nodes' AS, peering with the
// lab router over the nodes' IPv4 addresses) with an IPv4 and an IPv6
// subnet gives a pod on node-2 one address of each; the router learns the
// pod's /128 from node-2's session with node-2's global IPv6 address as next
// hop (and the /32 via its IPv4 address) and installs it; the external host
// and the pod reach each other over IPv6 with their own addresses; deleting
// the pod withdraws the /128.
func TestDualStackBGP(t *testing.T) {
	e := needFamily(t, "dual")
	v6 := e.ipv6(t)
	nodes := []string{"node-1", "node-2"}
	e.labelNodes(t, dsBGPLabel, dsBGPNetwork, nodes...)
	nw := &estuaryv1.Network{
		ObjectMeta: metav1.ObjectMeta{Name: dsBGPNetwork},
		Spec: estuaryv1.NetworkSpec{
			Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeBGP, NetID: ptr.To[int64](lab.NodeASN),
			NodeSelector: map[string]string{dsBGPLabel: dsBGPNetwork},
			BGPPeers:     []estuaryv1.BGPPeer{{Address: e.routerAddr, ASN: lab.RouterASN}},
		},
	}
	sn4 := dsSubnet(dsBGPNetwork+"-v4", dsBGPNetwork, lab.BGPCIDR, "")
	sn6 := dsSubnet(dsBGPNetwork+"-v6", dsBGPNetwork, v6.BGPSubnet, "")
	e.createDualNetwork(t, nw, sn4, sn6)
	cidr4, cidr6 := netip.MustParsePrefix(sn4.Spec.Range.CIDR), netip.MustParsePrefix(sn6.Spec.Range.CIDR)

	ns := e.newNamespace(t, "ds-bgp")
	node := nodes[1]
	e.mustCreate(t, ns, dualPod("bgp-a", node, dsBGPNetwork))
	p := e.waitPods(t, ns, "bgp-a")["bgp-a"]
	pa := podFamilies(t, &p, cidr4, cidr6)
	a4, a6 := pa.v4, pa.v6
	e.checkRecordsBySubnet(t, &p, map[string]string{sn4.Name: a4, sn6.Name: a6})
	podNS := e.podNetns(t, &p)

	t.Run("router learns the pod's /128 from its node via the node's IPv6 address", func(t *testing.T) {
		e.waitRouter128(t, a6, node, v6.Nodes[node])
		e.waitRouterRoute(t, a4, node)
	})

	t.Run("external host and pod reach each other over IPv6 without NAT", func(t *testing.T) {
		checkReachedFrom(t, "external -> "+p.Name, e.externalNetns, a6, v6.External)
		serveClientIP(t, e.externalNetns, net.JoinHostPort(v6.External, fmt.Sprint(dsExternalPort)))
		checkClientIPFrom(t, p.Name+" -> external", podNS, v6.External, dsExternalPort, a6)
	})

	t.Run("deleting the pod withdraws its /128", func(t *testing.T) {
		if err := e.c.Delete(testCtx(t, time.Minute), &p); err != nil {
			t.Fatalf("delete pod %s: %v", p.Name, err)
		}
		e.waitRouter128(t, a6, "", "")
		e.waitRouterRoute(t, a4, "")
	})
}
