package overlay

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/daemon/podnet"
	"github.com/estuary-cni/estuary/internal/dataplane/nstest"
	"github.com/estuary-cni/estuary/internal/nsrun"
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

// ipn runs `ip -n <ns> args...` and returns its output.
func ipn(tb testing.TB, ns string, args ...string) string {
	tb.Helper()
	return run(tb, "ip", append([]string{"-n", filepath.Base(ns)}, args...)...)
}

func run(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	out, err := exec.Command(name, args...).CombinedOutput() // #nosec G204 -- test commands
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// nsExec runs a command inside a namespace.
func nsExec(tb testing.TB, ns string, args ...string) string {
	tb.Helper()
	return run(tb, "ip", append([]string{"netns", "exec", filepath.Base(ns)}, args...)...)
}

// plug connects ns to the switch with a veth eth0 <-> sw-<tag>, with the
// given addresses on eth0.
func (l *lab) plug(t *testing.T, ns, tag string, addrs ...string) {
	t.Helper()
	ipn(t, ns, "link", "set", "lo", "up")
	ipn(t, ns, "link", "add", "eth0", "type", "veth", "peer", "name", "sw-"+tag, "netns", filepath.Base(l.sw))
	ipn(t, l.sw, "link", "set", "sw-"+tag, "master", "br0", "up")
	ipn(t, ns, "link", "set", "eth0", "up")
	for _, a := range addrs {
		ipn(t, ns, "addr", "add", a, "dev", "eth0", "nodad")
	}
}

func newLab(t *testing.T) *lab {
	t.Helper()
	nstest.RequireRoot(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	l := &lab{sw: nstest.New(t), ext: nstest.New(t), v6: ipv6Kernel()}
	ipn(t, l.sw, "link", "add", "br0", "type", "bridge")
	ipn(t, l.sw, "link", "set", "br0", "up")
	extAddrs := []string{extIP.String() + "/24"}
	if l.v6 {
		extAddrs = append(extAddrs, extIP6.String()+"/64")
	}
	l.plug(t, l.ext, "ext", extAddrs...)
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
	l.plug(t, n.ns, name, addrs...)
	ipn(t, n.ns, "route", "add", "default", "via", extIP.String())
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
	static := podnet.NewStatic()
	var addrs []podnet.Address
	for _, ip := range n.podIPs {
		bits := 16
		if ip.Is6() {
			bits = 64
		}
		addrs = append(addrs, podnet.Address{IP: netip.PrefixFrom(ip, bits), Family: familyOf(ip)})
	}
	static.Set("default", "pod-"+n.name, addrs...)
	b, err := podnet.New(podnet.Config{HostNetns: n.ns, Addresses: static, AddressTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n.pod = nstest.New(t)
	att := cniserver.Attachment{
		ContainerID: "c-" + n.name, IfName: "eth0", Netns: n.pod,
		PodNamespace: "default", PodName: "pod-" + n.name, PodUID: "uid-" + n.name,
	}
	if _, err := b.Add(context.Background(), att); err != nil {
		t.Fatalf("plumb pod on %s: %v", n.name, err)
	}
	n.hostVth = podnet.HostVethName(att)
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

// peer sends datagrams from a socket in fromNS to dst, served by a socket
// bound to dst in holder that answers with the sender's address as it saw
// it, and returns that address. It polls until a deadline.
func peer(t *testing.T, fromNS string, dst netip.Addr, holder string) netip.Addr {
	t.Helper()
	var srv *net.UDPConn
	if err := nsrun.Do(holder, func() (err error) {
		srv, err = net.ListenUDP("udp", &net.UDPAddr{IP: dst.AsSlice()})
		return err
	}); err != nil {
		t.Fatalf("listen on %s: %v", dst, err)
	}
	defer func() { _ = srv.Close() }()
	go reportPeer(srv)
	var cli *net.UDPConn
	if err := nsrun.Do(fromNS, func() (err error) {
		cli, err = net.DialUDP("udp", nil, srv.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		t.Fatalf("dial %s: %v", dst, err)
	}
	defer func() { _ = cli.Close() }()
	buf := make([]byte, 64)
	var err error
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if _, err = cli.Write([]byte("who")); err != nil {
			time.Sleep(100 * time.Millisecond) // pace retries of a failed send
			continue
		}
		_ = cli.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		var n int
		if n, err = cli.Read(buf); err == nil {
			a, perr := netip.ParseAddr(string(buf[:n]))
			if perr != nil {
				t.Fatalf("echo from %s: %v", dst, perr)
			}
			return a
		}
	}
	t.Fatalf("%s -> %s: no answer: %v", filepath.Base(fromNS), dst, err)
	return netip.Addr{}
}

func reportPeer(c *net.UDPConn) {
	buf := make([]byte, 64)
	for {
		_, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		_, _ = c.WriteToUDPAddrPort([]byte(from.Addr().Unmap().String()), from)
	}
}

func basename(ns string) string { return filepath.Base(ns) }
