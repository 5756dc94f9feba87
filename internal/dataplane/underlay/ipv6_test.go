package underlay

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/nstest/nspod"
)

// The IPv6 lab: one node on an untagged segment that also holds a host of
// the pods' subnet, and a router (the subnet's gateway) with an external
// host behind it.
//
//	pod (fd00:60::5/128) -- node eth0 fd00:50::11/64 --+
//	host fd00:60::77/64 -------------------------------+ switch
//	ext fd00:200::10 -- gw eth1 fd00:200::1 | gw eth0 fd00:60::1/64, fd00:50::1/64
var (
	podSubnet6 = netip.MustParsePrefix("fd00:60::/64")
	podIP6     = netip.MustParseAddr("fd00:60::5")
	gwIP6      = netip.MustParseAddr("fd00:60::1")
	hostIP6    = netip.MustParseAddr("fd00:60::77")
	extIP6     = netip.MustParseAddr("fd00:200::10")
)

// TestUnderlayUntaggedIPv6: on an untagged segment an IPv6 pod is reached
// without NAT through proxy NDP: a host of the pod's subnet on the segment
// resolves the pod to the node's MAC and both see each other's own
// addresses; the pod reaches the router and a host behind it with its own
// address too, through the subnet's table.
func TestUnderlayUntaggedIPv6(t *testing.T) {
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		t.Skipf("kernel without IPv6 (%v)", err)
	}
	sw := nstest.NewSwitch(t)
	node, gw, host, ext := nstest.New(t), nstest.New(t), nstest.New(t), nstest.New(t)
	nstest.Plug(t, sw, node, "node", "fd00:50::11/64")
	nstest.IP(t, node, "-6", "route", "add", "default", "via", "fd00:50::1")
	nstest.Plug(t, sw, gw, "gw", gwIP6.String()+"/64", "fd00:50::1/64")
	nstest.Plug(t, sw, host, "host", hostIP6.String()+"/64")
	nstest.IP(t, host, "-6", "route", "add", "default", "via", gwIP6.String())
	nstest.IP(t, gw, "link", "add", "eth1", "type", "veth", "peer", "name", "eth0", "netns", filepath.Base(ext))
	nstest.IP(t, gw, "addr", "add", "fd00:200::1/64", "dev", "eth1", "nodad")
	nstest.IP(t, gw, "link", "set", "eth1", "up")
	nstest.Exec(t, gw, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
	nstest.IP(t, ext, "link", "set", "lo", "up")
	nstest.IP(t, ext, "addr", "add", extIP6.String()+"/64", "dev", "eth0", "nodad")
	nstest.IP(t, ext, "link", "set", "eth0", "up")
	nstest.IP(t, ext, "-6", "route", "add", "default", "via", "fd00:200::1")

	pod, hostVeth := nspod.Plumb(t, node, "u6",
		podIP6)
	agent, err := NewAgent(node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)
	l := &lab{sw: sw, node: node, gw: gw, ext: ext, pod: pod, hostVeth: hostVeth, agent: agent}
	in := Input{
		Uplink: "eth0",
		Networks: []Network{{Name: "vlan0", Subnets: []Subnet{{
			Name: "vlan0-v6", CIDR: podSubnet6, Gateway: gwIP6, LocalPods: []netip.Addr{podIP6},
		}}}},
		Cluster:   []SubnetRef{{Name: "vlan0-v6", CIDR: podSubnet6, Created: time.Unix(1, 0)}},
		NodeAddrs: []desired.Addr{{Dev: "eth0", Prefix: netip.MustParsePrefix("fd00:50::11/64")}},
	}
	if plan := apply(t, l, in); plan.Empty() {
		t.Fatal("first Apply changed nothing")
	}
	if plan := apply(t, l, in); !plan.Empty() {
		t.Errorf("second Apply changed:\n%s", plan)
	}
	checkKernel6(t, l, in)

	wantPeer(t, "segment host -> pod", host, podIP6, pod, hostIP6)
	wantPeer(t, "pod -> segment host", pod, hostIP6, host, podIP6)
	wantPeer(t, "gateway -> pod", gw, podIP6, pod, gwIP6)
	wantPeer(t, "pod -> external", pod, extIP6, ext, podIP6)
	wantPeer(t, "external -> pod", ext, podIP6, pod, extIP6)
	mac := nodeMAC(t, l)
	for _, ns := range []string{host, gw} {
		if out := nstest.IP(t, ns, "-6", "neigh", "show", podIP6.String()); !strings.Contains(out, "lladdr "+mac) {
			t.Errorf("%s resolved %s to %q, want the node's MAC %s", filepath.Base(ns), podIP6, out, mac)
		}
	}

	if _, err := agent.Remove(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	if out := nstest.IP(t, node, "-6", "neigh", "show", "proxy"); strings.Contains(out, podIP6.String()) {
		t.Errorf("proxy entry left after Remove:\n%s", out)
	}
}

// checkKernel6 checks the node's IPv6 rule, table, proxy entry and
// sysctls, that no enhanced address was written (NDP solicits from the
// link-local address) and that the pod's address is not local to the node.
func checkKernel6(t *testing.T, l *lab, in Input) {
	t.Helper()
	table := fmt.Sprint(desired.TableUnderlayFirst + Numbering(in.Cluster)["vlan0-v6"])
	for _, want := range []struct{ out, substr string }{
		{nstest.IP(t, l.node, "-6", "rule", "show"), table + ":\tfrom " + podSubnet6.String() + " lookup " + table},
		{nstest.IP(t, l.node, "-6", "route", "show", "table", table), "default via " + gwIP6.String() + " dev eth0"},
		{nstest.IP(t, l.node, "-6", "route", "show", "table", table), podSubnet6.String() + " dev eth0 proto 229"},
		{nstest.IP(t, l.node, "-6", "neigh", "show", "proxy"), podIP6.String() + " dev eth0"},
		{nstest.IP(t, l.node, "-6", "route", "get", podIP6.String()), "dev " + l.hostVeth},
	} {
		if !strings.Contains(want.out, want.substr) {
			t.Errorf("want %q in:\n%s", want.substr, want.out)
		}
	}
	if out := nstest.IP(t, l.node, "-6", "addr", "show", "dev", "eth0"); strings.Contains(out, podIP6.String()) {
		t.Errorf("an address of the pod on the uplink:\n%s", out)
	}
	proxyNDP := false
	for _, s := range l.agent.Applied() {
		if got := strings.TrimSpace(nstest.Exec(t, l.node, "cat", "/proc/sys/"+s.Key)); got != s.Value {
			t.Errorf("%s = %s, want %s", s.Key, got, s.Value)
		}
		proxyNDP = proxyNDP || (s.Key == "net/ipv6/conf/eth0/proxy_ndp" && s.Value == "1")
	}
	if !proxyNDP {
		t.Errorf("sysctls = %v; want proxy_ndp 1 on eth0", l.agent.Applied())
	}
}
