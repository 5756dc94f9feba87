package overlay

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/nstest/nspod"
)

// node is one simulated node: its namespace, its address on the switch,
// one pod and the overlay agent.
type node struct {
	name    string
	ns      string
	ip, ip6 netip.Addr
	pod     string // the pod's namespace
	podIPs  []netip.Addr
	hostVth string
	agent   *Agent
}

// lab is two nodes and an external host on one switch (a bridge in a
// namespace of its own).
type lab struct {
	sw, ext string
	a, b    *node
	v6      bool
}

const netID = 7

var (
	subnet4  = netip.MustParsePrefix("10.244.0.0/16")
	subnet6  = netip.MustParsePrefix("fd00:244::/64")
	extIP    = netip.MustParseAddr("10.77.0.100")
	extIP6   = netip.MustParseAddr("fd77::100")
	foreignR = "198.51.100.0/24"
)

func ipv6Kernel() bool {
	_, err := os.Stat("/proc/sys/net/ipv6")
	return err == nil
}

func newLab(t *testing.T) *lab {
	t.Helper()
	l := &lab{sw: nstest.NewSwitch(t)}
	l.ext, l.v6 = nstest.New(t), ipv6Kernel()
	extAddrs := []string{extIP.String() + "/24"}
	if l.v6 {
		extAddrs = append(extAddrs, extIP6.String()+"/64")
	}
	nstest.Plug(t, l.sw, l.ext, "ext", extAddrs...)
	l.a = l.newNode(t, "node-a", 1, 10)
	l.b = l.newNode(t, "node-b", 2, 20)
	return l
}

// newNode makes node i (10.77.0.i, fd77::i) with one pod plumbed by podnet
// holding 10.244.i.host (and fd00:244::i:host).
func (l *lab) newNode(t *testing.T, name string, i, host int) *node {
	t.Helper()
	n := &node{name: name, ns: nstest.New(t), ip: netip.MustParseAddr(fmt.Sprintf("10.77.0.%d", i))}
	addrs := []string{n.ip.String() + "/24"}
	if l.v6 {
		n.ip6 = netip.MustParseAddr(fmt.Sprintf("fd77::%d", i))
		addrs = append(addrs, n.ip6.String()+"/64")
	}
	nstest.Plug(t, l.sw, n.ns, name, addrs...)
	nstest.IP(t, n.ns, "route", "add", "default", "via", extIP.String())
	n.podIPs = []netip.Addr{netip.MustParseAddr(fmt.Sprintf("10.244.%d.%d", i, host))}
	if l.v6 {
		n.podIPs = append(n.podIPs, netip.MustParseAddr(fmt.Sprintf("fd00:244::%d:%d", i, host)))
	}
	n.plumbPod(t)
	agent, err := NewAgent(n.ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)
	n.agent = agent
	return n
}

func (n *node) plumbPod(t *testing.T) {
	t.Helper()
	n.pod, n.hostVth = nspod.Plumb(t, n.ns, n.name, n.podIPs...)
}

// input is the overlay input of n, with other as the only remote.
func (l *lab) input(t *testing.T, n, other *node) Input {
	t.Helper()
	p, err := n.agent.ResolveParent(ParentSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Link != "eth0" || p.IP != n.ip || p.MTU != 1500 {
		t.Fatalf("%s: ResolveParent = %+v, want eth0 %s 1500", n.name, p, n.ip)
	}
	remoteIPs, ownIPs := []netip.Addr{other.ip}, []netip.Addr{n.ip}
	subnets := []Subnet{{Name: "pods4", CIDR: subnet4, NATOutgoing: true}}
	if l.v6 {
		remoteIPs = append(remoteIPs, other.ip6)
		ownIPs = append(ownIPs, n.ip6)
		subnets = append(subnets, Subnet{Name: "pods6", CIDR: subnet6, NATOutgoing: true})
	}
	return Input{
		Config: Config{
			Device: DeviceName(netID), VNI: netID, Parent: p.Link, LocalIP: p.IP,
			MTU: MTUFor(p.MTU, false), MAC: StableMAC(n.name),
		},
		LocalPods:       n.podIPs,
		NodeIPs:         ownIPs,
		Remotes:         []Remote{{Node: other.name, VTEP: other.ip, MAC: StableMAC(other.name), NodeIPs: remoteIPs}},
		Subnets:         subnets,
		ClusterPrefixes: []netip.Prefix{subnet4, subnet6},
	}
}

func basename(ns string) string { return filepath.Base(ns) }
