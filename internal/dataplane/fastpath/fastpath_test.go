package fastpath_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/estuary-cni/estuary/internal/dataplane/fastpath"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/nstest/nspod"
)

// node is a node namespace with two pods (A, B) plumbed by podnet and an
// uplink to an external host's namespace (ext).
type node struct {
	host, ext, podA, podB string
	vethA, vethB          string
	tc                    *ops.TC
}

const (
	subnet4 = "10.244.0.0/24"
	subnet6 = "fd00:244::/64"
	podA4   = "10.244.0.2"
	podB4   = "10.244.0.3"
	podA6   = "fd00:244::2"
	ext4    = "192.0.2.2"
	ext6    = "2001:db8:e::2"
	node4   = "192.0.2.1"
)

func newNode(t *testing.T) *node {
	nstest.RequireRoot(t)
	n := &node{host: nstest.New(t), ext: nstest.New(t)}
	nstest.IP(t, n.host, "link", "add", "up0", "type", "veth", "peer", "name", "eth0", "netns", filepath.Base(n.ext))
	nstest.IP(t, n.host, "addr", "add", node4+"/24", "dev", "up0")
	nstest.IP(t, n.host, "addr", "add", "2001:db8:e::1/64", "dev", "up0", "nodad")
	nstest.IP(t, n.host, "link", "set", "up0", "up")
	nstest.IP(t, n.ext, "link", "set", "lo", "up")
	nstest.IP(t, n.ext, "addr", "add", ext4+"/24", "dev", "eth0")
	nstest.IP(t, n.ext, "addr", "add", ext6+"/64", "dev", "eth0", "nodad")
	nstest.IP(t, n.ext, "link", "set", "eth0", "up")
	nstest.IP(t, n.ext, "route", "add", subnet4, "via", node4)
	nstest.IP(t, n.ext, "-6", "route", "add", subnet6, "via", "2001:db8:e::1")
	n.tc = router(t, n.host)
	n.podA, n.vethA = nspod.Plumb(t, n.host, "a",
		netip.MustParseAddr(podA4),
		netip.MustParseAddr(podA6))
	n.podB, n.vethB = nspod.Plumb(t, n.host, "b",
		netip.MustParseAddr(podB4))
	return n
}

// router makes the namespace host forward as a node with the fast path does
// (forwarding on, be_liberal set, and kube-proxy's drop of what conntrack
// finds invalid) and returns its traffic control writer.
func router(t *testing.T, host string) *ops.TC {
	t.Helper()
	nstest.Exec(t, host, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
		"net.netfilter.nf_conntrack_tcp_be_liberal=1")
	nstest.Exec(t, host, "nft", "add table inet filt; add chain inet filt check_invalid { type filter hook forward priority 0; ct state invalid drop; }")
	h, err := ops.Open(host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h.TC()
}

func (n *node) desired(nat bool) fastpath.Desired {
	return fastpath.Desired{
		Devices: []string{"up0"},
		Pods:    []string{n.vethA, n.vethB},
		Subnets: []fastpath.Subnet{
			{CIDR: netip.MustParsePrefix(subnet4), NATOutgoing: nat},
			{CIDR: netip.MustParsePrefix(subnet6), NATOutgoing: nat},
		},
	}
}

func load(t *testing.T, n *node, nat bool) *fastpath.Program {
	t.Helper()
	return attach(t, n.tc, n.desired(nat))
}

// attach loads a program (closed when the test ends) and syncs it to d in
// the namespace of tc.
func attach(t *testing.T, tc *ops.TC, d fastpath.Desired) *fastpath.Program {
	t.Helper()
	return attachWith(t, tc, d, fastpath.Options{})
}

// attachWith is attach with a program loaded with opts.
func attachWith(t *testing.T, tc *ops.TC, d fastpath.Desired, opts fastpath.Options) *fastpath.Program {
	t.Helper()
	p := loadProgram(t, opts)
	t.Cleanup(func() { _ = p.Close() })
	a, err := fastpath.NewAttacher(p, tc, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(d); err != nil {
		t.Fatal(err)
	}
	return p
}

// loadProgram loads the fast path; a kernel without a feature it needs skips
// the test, any other failure (the verifier's refusal) fails it.
func loadProgram(t *testing.T, opts fastpath.Options) *fastpath.Program {
	t.Helper()
	p, err := fastpath.Load(opts)
	if errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("the kernel cannot load the fast path: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// server accepts in ns on addr; each connection is read to its end and
// answered with "<bytes> <peer address>".
func server(t *testing.T, ns, addr string) {
	t.Helper()
	var l net.Listener
	if err := nsrun.Do(ns, func() (err error) { l, err = net.Listen("tcp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				got, _ := io.Copy(io.Discard, c)
				_, _ = fmt.Fprintf(c, "%d %s", got, c.RemoteAddr().(*net.TCPAddr).IP)
			}()
		}
	}()
}

// transfer sends size bytes from ns to addr over TCP, half-closes, and
// returns the peer address the server saw once the server has closed: the
// whole connection, teardown included, worked.
func transfer(t *testing.T, ns, addr string, size int) string {
	t.Helper()
	var c net.Conn
	if err := nsrun.Do(ns, func() (err error) { c, err = net.DialTimeout("tcp", addr, 5*time.Second); return err }); err != nil {
		t.Fatalf("dial %s from %s: %v", addr, ns, err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	w := bufio.NewWriterSize(c, 1<<16)
	buf := make([]byte, 1<<16)
	for sent := 0; sent < size; sent += len(buf) {
		if _, err := w.Write(buf); err != nil {
			t.Fatalf("send to %s: %v", addr, err)
		}
	}
	if err := errors.Join(w.Flush(), c.(*net.TCPConn).CloseWrite()); err != nil {
		t.Fatalf("send to %s: %v", addr, err)
	}
	reply, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("read the reply from %s (the connection did not close): %v", addr, err)
	}
	var got int
	var peer string
	if _, err := fmt.Sscanf(string(reply), "%d %s", &got, &peer); err != nil || got != size {
		t.Fatalf("%s received %q; want %d bytes", addr, reply, size)
	}
	return peer
}

func ping(t *testing.T, ns, dst string) {
	t.Helper()
	nstest.Exec(t, ns, "ping", "-c", "5", "-i", "0.05", "-W", "2", dst)
}

func stats(t *testing.T, p *fastpath.Program) fastpath.Stats {
	t.Helper()
	s, err := p.Stats()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func delta(a, b fastpath.Stats) fastpath.Stats {
	return fastpath.Stats{
		PassOther: b.PassOther - a.PassOther, PassConntrack: b.PassConntrack - a.PassConntrack,
		PassRoute: b.PassRoute - a.PassRoute, RedirectPeer: b.RedirectPeer - a.RedirectPeer,
		RedirectNeigh: b.RedirectNeigh - a.RedirectNeigh, Encap: b.Encap - a.Encap, Decap: b.Decap - a.Decap,
	}
}

const size = 8 << 20

func TestEstablishedFlowsAreForwardedByTheProgram(t *testing.T) {
	n := newNode(t)
	p := load(t, n, false)
	server(t, n.ext, ext4+":5001")
	server(t, n.ext, "["+ext6+"]:5001")
	server(t, n.podB, podB4+":5002")

	t.Run("pod to external host and back", func(t *testing.T) {
		before := stats(t, p)
		if peer := transfer(t, n.podA, ext4+":5001", size); peer != podA4 {
			t.Errorf("the external host saw %s; want the pod's own %s", peer, podA4)
		}
		d := delta(before, stats(t, p))
		// Data leaves through up0's neighbour layer; ACKs come back into the pod.
		if d.RedirectNeigh < 50 || d.RedirectPeer < 10 {
			t.Errorf("verdicts %+v; want the data redirected out of the uplink and the ACKs into the pod", d)
		}
	})
	t.Run("IPv6 pod to external host", func(t *testing.T) {
		before := stats(t, p)
		if peer := transfer(t, n.podA, "["+ext6+"]:5001", size); peer != podA6 {
			t.Errorf("the external host saw %s; want %s", peer, podA6)
		}
		if d := delta(before, stats(t, p)); d.RedirectNeigh < 50 || d.RedirectPeer < 10 {
			t.Errorf("verdicts %+v; want IPv6 redirected both ways", d)
		}
	})
	t.Run("pod to pod on the node", func(t *testing.T) {
		before := stats(t, p)
		if peer := transfer(t, n.podA, podB4+":5002", size); peer != podA4 {
			t.Errorf("pod B saw %s; want %s", peer, podA4)
		}
		if d := delta(before, stats(t, p)); d.RedirectPeer < 60 || d.RedirectNeigh != 0 {
			t.Errorf("verdicts %+v; want both directions delivered into the other pod", d)
		}
	})
	t.Run("ping", func(t *testing.T) {
		before := stats(t, p)
		ping(t, n.podA, ext4)
		if d := delta(before, stats(t, p)); d.RedirectNeigh < 5 || d.RedirectPeer < 5 {
			t.Errorf("verdicts %+v; want 5 echoes out and 5 replies in", d)
		}
	})
}

func TestNATedFlowsTakeTheStack(t *testing.T) {
	n := newNode(t)
	server(t, n.ext, ext4+":5001")
	server(t, n.podB, podB4+":5002")
	// A Service as kube-proxy makes one, and natOutgoing's masquerade; the
	// external host has no route back to the pods.
	nstest.Exec(t, n.host, "nft", strings.Join([]string{
		"add table ip nat",
		"add chain ip nat svc { type nat hook prerouting priority -100; }",
		"add chain ip nat masq { type nat hook postrouting priority 100; }",
		"add rule ip nat svc ip daddr 10.96.0.10 tcp dport 80 dnat to " + podB4 + ":5002",
		"add rule ip nat masq ip saddr " + subnet4 + " oifname up0 masquerade",
	}, "; "))
	nstest.IP(t, n.ext, "route", "del", subnet4)
	p := load(t, n, true)

	t.Run("service", func(t *testing.T) {
		before := stats(t, p)
		if peer := transfer(t, n.podA, "10.96.0.10:80", size); peer != podA4 {
			t.Errorf("the backend saw %s; want %s", peer, podA4)
		}
		if d := delta(before, stats(t, p)); d.RedirectPeer+d.RedirectNeigh != 0 || d.PassConntrack < 60 {
			t.Errorf("verdicts %+v; want every packet of the DNATed flow left to the stack", d)
		}
	})
	t.Run("masquerade", func(t *testing.T) {
		before := stats(t, p)
		if peer := transfer(t, n.podA, ext4+":5001", size); peer != node4 {
			t.Errorf("the external host saw %s; want the node's %s", peer, node4)
		}
		ping(t, n.podA, ext4)
		if d := delta(before, stats(t, p)); d.RedirectPeer+d.RedirectNeigh != 0 {
			t.Errorf("verdicts %+v; want the masqueraded flow and echoes left to the stack", d)
		}
	})
	// An echo from outside into a natOutgoing subnet (a node pinging a pod
	// of another node): the reply leaves such a subnet and takes the stack,
	// so the request must too, or conntrack drops the reply as invalid, as
	// kube-proxy's forward rule does.
	t.Run("echo into a natOutgoing subnet", func(t *testing.T) {
		nstest.IP(t, n.ext, "route", "add", subnet4, "via", node4)
		defer nstest.IP(t, n.ext, "route", "del", subnet4)
		nstest.Exec(t, n.host, "nft", "add table ip filter; "+
			"add chain ip filter forwarding { type filter hook forward priority 0; }; "+
			"add rule ip filter forwarding ct state invalid drop")
		defer nstest.Exec(t, n.host, "nft", "delete table ip filter")
		before := stats(t, p)
		ping(t, n.ext, podA4)
		if d := delta(before, stats(t, p)); d.RedirectPeer+d.RedirectNeigh != 0 {
			t.Errorf("verdicts %+v; want the echoes and their replies left to the stack", d)
		}
	})
}

func TestAProgramOutlivesItsLoaderAndIsReplaced(t *testing.T) {
	n := newNode(t)
	server(t, n.ext, ext4+":5001")
	first := loadProgram(t, fastpath.Options{})
	a, err := fastpath.NewAttacher(first, n.tc, time.Hour)
	if err == nil {
		err = a.Sync(n.desired(false))
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil { // the daemon stops
		t.Fatal(err)
	}
	transfer(t, n.podA, ext4+":5001", size)

	second := load(t, n, false) // the daemon starts again
	id, err := second.ID()
	if err != nil {
		t.Fatal(err)
	}
	for _, dev := range []string{"up0", n.vethA, n.vethB} {
		got, ok, err := n.tc.Ingress(dev)
		if err != nil || !ok || got.ID != id || got.Name != fastpath.Name {
			t.Errorf("%s runs %+v (attached %v, err %v); want program %d", dev, got, ok, err, id)
		}
	}
	before := stats(t, second)
	transfer(t, n.podA, ext4+":5001", size)
	if d := delta(before, stats(t, second)); d.RedirectNeigh < 50 {
		t.Errorf("verdicts %+v; want the new program forwarding", d)
	}

	removed, err := fastpath.Remove(n.tc)
	if err != nil || removed != 3 {
		t.Fatalf("Remove took the program off %d devices (err %v); want 3", removed, err)
	}
	for _, dev := range []string{"up0", n.vethA, n.vethB} {
		if got, ok, _ := n.tc.Ingress(dev); ok {
			t.Errorf("%s still runs %+v after Remove", dev, got)
		}
	}
	before = stats(t, second)
	transfer(t, n.podA, ext4+":5001", size)
	if d := delta(before, stats(t, second)); d != (fastpath.Stats{}) {
		t.Errorf("verdicts %+v after Remove; want none", d)
	}
}
