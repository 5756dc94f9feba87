package ops

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// dropWait is how long a connection attempt or a datagram waits before a
// test calls the packet dropped: a dropped packet has no other sign.
const dropWait = 700 * time.Millisecond

// policyNode is a host namespace routing for pods the way estuary's node
// does: each pod holds /32 and /128 addresses on eth0 with default routes
// via link-local gateways, the host a route per address through the pod's
// host veth est<11 hex>, and no bridge. The host holds 10.255.0.1 and
// fd00:ff::1 on lo (the node's own addresses).
type policyNode struct {
	host string
	pods []policyPod
	pol  *Policy
}

type policyPod struct {
	ns, veth string
	v4, v6   netip.Addr
}

var nodeV4, nodeV6 = netip.MustParseAddr("10.255.0.1"), netip.MustParseAddr("fd00:ff::1")

func newPolicyNode(t *testing.T, pods int) *policyNode {
	t.Helper()
	n := &policyNode{host: nstest.New(t)}
	nstest.Exec(t, n.host, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
		"net.ipv6.conf.default.accept_dad=0")
	nstest.IP(t, n.host, "link", "set", "lo", "up")
	nstest.IP(t, n.host, "addr", "add", nodeV4.String()+"/32", "dev", "lo")
	nstest.IP(t, n.host, "addr", "add", nodeV6.String()+"/128", "dev", "lo")
	for i := range pods {
		p := policyPod{ns: nstest.New(t), veth: fmt.Sprintf("est%011x", 0xa0+i),
			v4: netip.AddrFrom4([4]byte{10, 0, 0, byte(i + 1)}), v6: netip.AddrFrom16([16]byte{0: 0xfd, 15: byte(i + 1)})}
		nstest.IP(t, p.ns, "link", "set", "lo", "up")
		nstest.IP(t, n.host, "link", "add", p.veth, "address", "ee:ee:ee:ee:ee:ee", "type", "veth", "peer", "name", "eth0", "netns", filepath.Base(p.ns))
		nstest.IP(t, n.host, "link", "set", p.veth, "up")
		nstest.IP(t, p.ns, "link", "set", "eth0", "up")
		nstest.IP(t, p.ns, "addr", "add", p.v4.String()+"/32", "dev", "eth0")
		nstest.IP(t, p.ns, "addr", "add", p.v6.String()+"/128", "dev", "eth0", "nodad")
		nstest.IP(t, p.ns, "route", "add", "169.254.1.1", "dev", "eth0", "scope", "link")
		nstest.IP(t, p.ns, "route", "add", "default", "via", "169.254.1.1", "dev", "eth0")
		nstest.IP(t, p.ns, "neigh", "add", "169.254.1.1", "lladdr", "ee:ee:ee:ee:ee:ee", "dev", "eth0", "nud", "permanent")
		nstest.IP(t, p.ns, "-6", "route", "add", "default", "via", "fe80::ecee:eeff:feee:eeee", "dev", "eth0")
		nstest.IP(t, p.ns, "neigh", "add", "fe80::ecee:eeff:feee:eeee", "lladdr", "ee:ee:ee:ee:ee:ee", "dev", "eth0", "nud", "permanent")
		nstest.IP(t, n.host, "route", "add", p.v4.String()+"/32", "dev", p.veth)
		nstest.IP(t, n.host, "-6", "route", "add", p.v6.String()+"/128", "dev", p.veth)
		n.pods = append(n.pods, p)
	}
	pol, err := OpenPolicy(n.host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pol.Close)
	n.pol = pol
	return n
}

// ensure compiles m, writes it and checks that writing it again changes
// nothing.
func (n *policyNode) ensure(t *testing.T, m policy.Node) {
	t.Helper()
	rs, err := policy.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.pol.Ensure(rs); err != nil {
		t.Fatal(err)
	}
	if o, err := n.pol.Ensure(rs); err != nil || !o.Empty() {
		t.Fatalf("second write of the same ruleset: %v\n%s", err, o)
	}
}

// listenTCP listens on addr:port inside ns and echoes each connection.
func listenTCP(t *testing.T, ns string, a netip.Addr, port uint16) {
	t.Helper()
	var l net.Listener
	if err := nsrun.Do(ns, func() (err error) {
		l, err = net.Listen("tcp", netip.AddrPortFrom(a, port).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
}

// dialTCP connects from ns to a:port, or fails after dropWait.
func dialTCP(ns string, a netip.Addr, port uint16) (net.Conn, error) {
	var c net.Conn
	err := nsrun.Do(ns, func() (err error) {
		c, err = net.DialTimeout("tcp", netip.AddrPortFrom(a, port).String(), dropWait)
		return err
	})
	return c, err
}

// echoes says whether a message sent on c comes back.
func echoes(c net.Conn) error {
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	return nil
}

func tcpWorks(t *testing.T, ns string, a netip.Addr, port uint16) bool {
	t.Helper()
	c, err := dialTCP(ns, a, port)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return false
		}
		t.Fatalf("dial %s port %d: %v (not a drop)", a, port, err)
	}
	defer func() { _ = c.Close() }()
	if err := echoes(c); err != nil {
		t.Fatalf("connected to %s port %d, no reply: %v", a, port, err)
	}
	return true
}

func expectTCP(t *testing.T, what string, ns string, a netip.Addr, port uint16, want bool) {
	t.Helper()
	if got := tcpWorks(t, ns, a, port); got != want {
		t.Errorf("%s: TCP to %s port %d passes = %v, want %v", what, a, port, got, want)
	}
}

func isolatedIngress(allow ...policy.Rule) policy.Direction {
	return policy.Direction{Isolated: true, Allow: allow}
}

func pod(p policyPod) policy.Block            { return policy.Block{CIDR: netip.PrefixFrom(p.v4, 32)} }
func pod6(p policyPod) policy.Block           { return policy.Block{CIDR: netip.PrefixFrom(p.v6, 128)} }
func tcpPort(n uint16) []policy.Port          { return []policy.Port{{Protocol: policy.TCP, From: n}} }
func peersOf(bs ...policy.Block) policy.Peers { return policy.Peers{Blocks: bs} }

// TestPolicyTCPPorts: b admits TCP 8080 from a only, over IPv4 and IPv6;
// 8081 and c are dropped; a's allowed connection gets its replies.
func TestPolicyTCPPorts(t *testing.T) {
	n := newPolicyNode(t, 3)
	a, b, c := n.pods[0], n.pods[1], n.pods[2]
	for _, port := range []uint16{8080, 8081} {
		listenTCP(t, b.ns, b.v4, port)
		listenTCP(t, b.ns, b.v6, port)
	}
	expectTCP(t, "before any policy", c.ns, b.v4, 8081, true)
	n.ensure(t, policy.Node{Endpoints: []policy.Endpoint{{HostVeth: b.veth, Ingress: isolatedIngress(
		policy.Rule{ID: "np/b/0", Peers: peersOf(pod(a), pod6(a)), Ports: tcpPort(8080)})}}})
	expectTCP(t, "allowed peer and port", a.ns, b.v4, 8080, true)
	expectTCP(t, "allowed peer and port, IPv6", a.ns, b.v6, 8080, true)
	expectTCP(t, "other port", a.ns, b.v4, 8081, false)
	expectTCP(t, "other port, IPv6", a.ns, b.v6, 8081, false)
	expectTCP(t, "other peer", c.ns, b.v4, 8080, false)
	expectTCP(t, "the node itself (output is not filtered)", n.host, b.v4, 8081, true)
}

// TestPolicyIPBlockExcept: b admits 10.0.0.0/24 except c's address.
func TestPolicyIPBlockExcept(t *testing.T) {
	n := newPolicyNode(t, 3)
	a, b, c := n.pods[0], n.pods[1], n.pods[2]
	listenTCP(t, b.ns, b.v4, 80)
	n.ensure(t, policy.Node{Endpoints: []policy.Endpoint{{HostVeth: b.veth, Ingress: isolatedIngress(
		policy.Rule{ID: "np/b/0", Peers: peersOf(policy.Block{CIDR: netip.MustParsePrefix("10.0.0.0/24"),
			Except: []netip.Prefix{netip.PrefixFrom(c.v4, 32)}})})}}})
	expectTCP(t, "inside the block", a.ns, b.v4, 80, true)
	expectTCP(t, "the except", c.ns, b.v4, 80, false)
}

// udpAnswers says whether a datagram from ns to a:port is echoed.
func udpAnswers(t *testing.T, ns string, a netip.Addr, port uint16) bool {
	t.Helper()
	var c net.Conn
	if err := nsrun.Do(ns, func() (err error) {
		c, err = net.Dial("udp", netip.AddrPortFrom(a, port).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_, _ = c.Write([]byte("ping"))
	_ = c.SetReadDeadline(time.Now().Add(dropWait))
	_, err := c.Read(make([]byte, 8))
	return err == nil
}

func listenUDP(t *testing.T, ns string, a netip.Addr, port uint16) {
	t.Helper()
	var pc net.PacketConn
	if err := nsrun.Do(ns, func() (err error) {
		pc, err = net.ListenPacket("udp", netip.AddrPortFrom(a, port).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			k, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo(buf[:k], from)
		}
	}()
}

// TestPolicyEgressUDPAndICMP: a may send UDP 5353 to b and nothing else:
// the answer comes back, UDP 5354 and ping are dropped; a rule without
// ports admits ping. What a sends its node: TestPolicyPodToNode.
func TestPolicyEgressUDPAndICMP(t *testing.T) {
	n := newPolicyNode(t, 2)
	a, b := n.pods[0], n.pods[1]
	listenUDP(t, b.ns, b.v4, 5353)
	listenUDP(t, b.ns, b.v4, 5354)
	egress := policy.Direction{Isolated: true, Allow: []policy.Rule{{ID: "np/a/0", Peers: peersOf(pod(b)),
		Ports: []policy.Port{{Protocol: policy.UDP, From: 5353}}}}}
	n.ensure(t, policy.Node{Endpoints: []policy.Endpoint{{HostVeth: a.veth, Egress: egress}}})
	if !udpAnswers(t, a.ns, b.v4, 5353) {
		t.Error("UDP to the allowed port is not answered")
	}
	if udpAnswers(t, a.ns, b.v4, 5354) {
		t.Error("UDP to another port is answered")
	}
	if ping(t, a.ns, b.v4) {
		t.Error("ping passes a rule with ports only")
	}

	egress.Allow = append(egress.Allow, policy.Rule{ID: "np/a/1", Peers: peersOf(pod(b))})
	n.ensure(t, policy.Node{Endpoints: []policy.Endpoint{{HostVeth: a.veth, Egress: egress}}})
	if !ping(t, a.ns, b.v4) {
		t.Error("ping does not pass a rule without ports")
	}
}

func ping(t *testing.T, ns string, a netip.Addr) bool {
	t.Helper()
	return exec.Command("ip", "netns", "exec", filepath.Base(ns), "ping", "-c1", "-W1", a.String()).Run() == nil
}

// TestPolicySCTP: SCTP to an allowed port passes, to another is dropped.
func TestPolicySCTP(t *testing.T) {
	n := newPolicyNode(t, 2)
	a, b := n.pods[0], n.pods[1]
	for _, port := range []int{3868, 3869} {
		fd, err := sctpSocket(b.ns)
		if err != nil {
			t.Skipf("this kernel has no SCTP sockets (%v); the rules match SCTP by protocol number and port as they do TCP and UDP", err)
		}
		t.Cleanup(func() { _ = syscall.Close(fd) })
		sa := &syscall.SockaddrInet4{Port: port, Addr: b.v4.As4()}
		if err := syscall.Bind(fd, sa); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Listen(fd, 4); err != nil {
			t.Fatal(err)
		}
	}
	n.ensure(t, policy.Node{Endpoints: []policy.Endpoint{{HostVeth: b.veth, Ingress: isolatedIngress(
		policy.Rule{ID: "np/b/0", Peers: peersOf(pod(a)), Ports: []policy.Port{{Protocol: policy.SCTP, From: 3868}}})}}})
	for port, want := range map[int]bool{3868: true, 3869: false} {
		if got := sctpConnects(t, a.ns, b.v4, port); got != want {
			t.Errorf("SCTP to port %d connects = %v, want %v", port, got, want)
		}
	}
}

func sctpSocket(ns string) (int, error) {
	fd := -1
	err := nsrun.Do(ns, func() (err error) {
		fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, syscall.IPPROTO_SCTP)
		return err
	})
	return fd, err
}

// sctpConnects: an association from ns to a:port comes up within dropWait.
func sctpConnects(t *testing.T, ns string, a netip.Addr, port int) bool {
	t.Helper()
	fd, err := sctpSocket(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Close(fd) }()
	tv := syscall.NsecToTimeval(dropWait.Nanoseconds())
	if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_SNDTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	err = syscall.Connect(fd, &syscall.SockaddrInet4{Port: port, Addr: a.As4()})
	switch {
	case err == nil:
		return true
	case errors.Is(err, syscall.EINPROGRESS), errors.Is(err, syscall.ETIMEDOUT), errors.Is(err, syscall.EAGAIN):
		return false
	}
	t.Fatalf("SCTP connect to %s port %d: %v (not a drop)", a, port, err)
	return false
}

// TestPolicyChangeAndEstablishedFlows: a policy that stops admitting a
// port refuses new connections at once; a connection established before
// keeps running (conntrack carries it; only first packets meet the pod
// chains). A changed policy leaves the table equal to the new ruleset.
func TestPolicyChangeAndEstablishedFlows(t *testing.T) {
	n := newPolicyNode(t, 2)
	a, b := n.pods[0], n.pods[1]
	listenTCP(t, b.ns, b.v4, 8080)
	allow := policy.Node{Endpoints: []policy.Endpoint{{HostVeth: b.veth, Ingress: isolatedIngress(
		policy.Rule{ID: "np/b/0", Peers: peersOf(pod(a)), Ports: tcpPort(8080)})}}}
	n.ensure(t, allow)
	est, err := dialTCP(a.ns, b.v4, 8080)
	if err != nil {
		t.Fatalf("allowed connection: %v", err)
	}
	defer func() { _ = est.Close() }()
	if err := echoes(est); err != nil {
		t.Fatal(err)
	}
	deny := policy.Node{Endpoints: []policy.Endpoint{{HostVeth: b.veth, Ingress: isolatedIngress()}}}
	n.ensure(t, deny)
	rs, _ := policy.Compile(deny)
	have, err := n.pol.Read()
	if err != nil {
		t.Fatal(err)
	}
	if o := policy.Diff(rs, have); !o.Empty() {
		t.Errorf("read-back after the change differs from the new ruleset:\n%s", o)
	}
	expectTCP(t, "new connection after the change", a.ns, b.v4, 8080, false)
	if err := echoes(est); err != nil {
		t.Errorf("the established connection stopped: %v", err)
	}
	n.ensure(t, allow)
	expectTCP(t, "new connection after allowing again", a.ns, b.v4, 8080, true)
	n.ensure(t, policy.Node{})
	if have, _ := n.pol.Read(); len(have.Chains) != 0 || len(have.Sets) != 0 || len(have.Ingress) != 0 {
		t.Errorf("an empty model leaves %+v", have)
	}
}

// TestPolicyReadBack: what Read returns is what was compiled (sets as
// ranges, chains as tags, map entries), and a table someone else changed
// is put back.
func TestPolicyReadBack(t *testing.T) {
	n := newPolicyNode(t, 2)
	a, b := n.pods[0], n.pods[1]
	m := policy.Node{Endpoints: []policy.Endpoint{{HostVeth: b.veth,
		Ingress: policy.Direction{Admin: []policy.AdminRule{{Rule: policy.Rule{ID: "anp/x/0", Peers: peersOf(pod(a))}, Action: policy.Pass}},
			Isolated: true, Allow: []policy.Rule{{ID: "np/b/0", Peers: peersOf(policy.Block{CIDR: netip.MustParsePrefix("0.0.0.0/0"),
				Except: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, pod6(a)), Ports: []policy.Port{{Protocol: policy.TCP, From: 1, To: 1024}}}}},
		Egress: policy.Direction{Baseline: []policy.AdminRule{{Rule: policy.Rule{ID: "banp/0", Peers: policy.Peers{Any: true}}, Action: policy.Deny}}}}}}
	n.ensure(t, m)
	rs, _ := policy.Compile(m)
	have, err := n.pol.Read()
	if err != nil {
		t.Fatal(err)
	}
	if !have.Present || !have.Skeleton {
		t.Fatalf("table present %v, skeleton %v", have.Present, have.Skeleton)
	}
	for _, s := range rs.Sets {
		if !reflect.DeepEqual(have.Sets[s.Name], s) {
			t.Errorf("set %s read back as %+v, want %+v", s.Name, have.Sets[s.Name], s)
		}
	}
	nstest.Exec(t, n.host, "nft", "add rule inet estuary-policy forward accept")
	if o, err := n.pol.Ensure(rs); err != nil || !o.Create || !o.Delete {
		t.Errorf("a changed skeleton: %v\n%s", err, o)
	}
	nstest.Exec(t, n.host, "nft", "flush chain inet estuary-policy "+policy.IngressChain(b.veth))
	if o, err := n.pol.Ensure(rs); err != nil || len(o.RefillChains) != 1 || o.Create {
		t.Errorf("a flushed chain: %v\n%s", err, o)
	}
	if o, _ := n.pol.Ensure(rs); !o.Empty() {
		t.Errorf("not in line after repair:\n%s", o)
	}
}

// TestPolicyRemove: Remove deletes the whole table once, and on a node
// without it removes nothing and succeeds.
func TestPolicyRemove(t *testing.T) {
	n := newPolicyNode(t, 1)
	n.ensure(t, policy.Node{Endpoints: []policy.Endpoint{{HostVeth: n.pods[0].veth,
		Ingress: policy.Direction{Isolated: true}}}})
	if removed, err := n.pol.Remove(); err != nil || !removed {
		t.Fatalf("Remove of a present table: %v, %v", removed, err)
	}
	if have, err := n.pol.Read(); err != nil || have.Present {
		t.Fatalf("table after Remove: present %v, %v", have.Present, err)
	}
	if removed, err := n.pol.Remove(); err != nil || removed {
		t.Fatalf("Remove of an absent table: %v, %v", removed, err)
	}
}
