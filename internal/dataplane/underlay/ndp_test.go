package underlay

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// TestNDPHelpers: on an IPv6 subnet the gateway check, duplicate address
// probe and announcement use Neighbor Discovery. The node and the gateway
// share an untagged segment; nothing is applied, as before a pod's
// address is proxied.
func TestNDPHelpers(t *testing.T) {
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		t.Skipf("kernel without IPv6 (%v)", err)
	}
	sw := nstest.NewSwitch(t)
	node, gw := nstest.New(t), nstest.New(t)
	nstest.Plug(t, sw, node, "node", "fd00:50::11/64")
	nstest.Plug(t, sw, gw, "gw", "fd00:60::1/64", "fd00:50::1/64")
	agent, err := NewAgent(node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)
	subnet, pod, gwIP := netip.MustParsePrefix("fd00:60::/64"), netip.MustParseAddr("fd00:60::5"), netip.MustParseAddr("fd00:60::1")
	in := Input{
		Uplink: "eth0",
		Networks: []Network{{Name: "vlan0", Subnets: []Subnet{
			{Name: "v6", CIDR: subnet, Gateway: gwIP, LocalPods: []netip.Addr{pod}},
			{Name: "v6-v4gw", CIDR: netip.MustParsePrefix("fd00:61::/64"), Gateway: netip.MustParseAddr("192.168.61.1")},
		}}},
	}
	ctx := context.Background()
	gwMAC, nodeMAC := linkMAC(t, gw), linkMAC(t, node)
	if mac, err := agent.CheckGateway(ctx, in, pod, 2*time.Second); err != nil || mac.String() != gwMAC {
		t.Errorf("CheckGateway = %v, %v; want %s", mac, err, gwMAC)
	}
	if out := nstest.IP(t, gw, "-6", "neigh", "show", pod.String()); !strings.Contains(out, nodeMAC) {
		t.Errorf("gateway did not learn the pod's address at the node: %q", out)
	}
	if _, err := agent.CheckGateway(ctx, in, netip.MustParseAddr("fd00:61::5"), time.Second); err == nil ||
		!strings.Contains(err.Error(), "no gateway of its family") {
		t.Errorf("CheckGateway with an IPv4 gateway for an IPv6 address = %v", err)
	}
	if mac, err := agent.Probe(ctx, in, gwIP, 2*time.Second); err != nil || mac.String() != gwMAC {
		t.Errorf("Probe of the gateway's address = %v, %v; want %s", mac, err, gwMAC)
	}
	if mac, err := agent.Probe(ctx, in, netip.MustParseAddr("fd00:60::99"), 300*time.Millisecond); err != nil || mac != nil {
		t.Errorf("Probe of a free address = %v, %v; want none", mac, err)
	}
	nstest.IP(t, gw, "-6", "addr", "del", gwIP.String()+"/64", "dev", "eth0")
	if _, err := agent.CheckGateway(ctx, in, pod, 300*time.Millisecond); !errors.Is(err, ErrNoAnswer) {
		t.Errorf("CheckGateway of a silent gateway = %v, want ErrNoAnswer", err)
	}
	nstest.IP(t, gw, "-6", "neigh", "replace", pod.String(), "lladdr", "02:00:00:00:00:05", "dev", "eth0", "nud", "stale")
	if err := agent.Announce(in, pod); err != nil {
		t.Fatal(err)
	}
	var out string
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out = nstest.IP(t, gw, "-6", "neigh", "show", pod.String()); strings.Contains(out, nodeMAC) {
			return
		}
	}
	t.Errorf("gateway's entry for %s after Announce = %q, want %s", pod, out, nodeMAC)
}

// linkMAC returns the MAC of eth0 in ns.
func linkMAC(t *testing.T, ns string) string {
	t.Helper()
	f := strings.Fields(nstest.IP(t, ns, "-o", "link", "show", "eth0"))
	for i := range len(f) - 1 {
		if f[i] == "link/ether" {
			return f[i+1]
		}
	}
	t.Fatalf("eth0 in %s has no Ethernet address", ns)
	return ""
}
