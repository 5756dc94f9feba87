package nstest

import (
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/nsrun"
)

// Run runs a command and returns its combined output, failing tb when it
// fails.
func Run(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	out, err := exec.Command(name, args...).CombinedOutput() // #nosec G204 -- test commands
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// IP runs `ip -n <ns> args...` and returns its output.
func IP(tb testing.TB, ns string, args ...string) string {
	tb.Helper()
	return Run(tb, "ip", append([]string{"-n", filepath.Base(ns)}, args...)...)
}

// Exec runs a command inside the namespace ns.
func Exec(tb testing.TB, ns string, args ...string) string {
	tb.Helper()
	return Run(tb, "ip", append([]string{"netns", "exec", filepath.Base(ns)}, args...)...)
}

// NewSwitch skips the test unless it runs as root with iproute2's ip, and
// returns a new namespace holding the bridge br0, up, for Plug to connect
// namespaces to.
func NewSwitch(tb testing.TB) string {
	tb.Helper()
	RequireRoot(tb)
	if _, err := exec.LookPath("ip"); err != nil {
		tb.Skip("needs iproute2's ip")
	}
	sw := New(tb)
	IP(tb, sw, "link", "add", "br0", "type", "bridge")
	IP(tb, sw, "link", "set", "br0", "up")
	return sw
}

// Plug brings lo up in ns and connects ns to the switch sw (see NewSwitch)
// with a veth eth0 <-> sw-<tag> whose switch end is a port of br0. The
// addresses go on eth0 without duplicate address detection, so IPv6 ones
// are usable at once.
func Plug(tb testing.TB, sw, ns, tag string, addrs ...string) {
	tb.Helper()
	IP(tb, ns, "link", "set", "lo", "up")
	IP(tb, ns, "link", "add", "eth0", "type", "veth", "peer", "name", "sw-"+tag, "netns", filepath.Base(sw))
	IP(tb, sw, "link", "set", "sw-"+tag, "master", "br0", "up")
	IP(tb, ns, "link", "set", "eth0", "up")
	for _, a := range addrs {
		IP(tb, ns, "addr", "add", a, "dev", "eth0", "nodad")
	}
}

// Peer sends datagrams from a socket in fromNS to dst, answered by a socket
// bound to dst in holder with the sender's address as it saw it, and
// returns that address. It retries until within has passed, then fails tb.
func Peer(tb testing.TB, fromNS string, dst netip.Addr, holder string, within time.Duration) netip.Addr {
	tb.Helper()
	var srv *net.UDPConn
	if err := nsrun.Do(holder, func() (err error) {
		srv, err = net.ListenUDP("udp", &net.UDPAddr{IP: dst.AsSlice()})
		return err
	}); err != nil {
		tb.Fatalf("listen on %s: %v", dst, err)
	}
	defer func() { _ = srv.Close() }()
	go reportPeer(srv)
	var cli *net.UDPConn
	if err := nsrun.Do(fromNS, func() (err error) {
		cli, err = net.DialUDP("udp", nil, srv.LocalAddr().(*net.UDPAddr))
		return err
	}); err != nil {
		tb.Fatalf("dial %s: %v", dst, err)
	}
	defer func() { _ = cli.Close() }()
	buf := make([]byte, 64)
	var err error
	for deadline := time.Now().Add(within); time.Now().Before(deadline); {
		if _, err = cli.Write([]byte("who")); err != nil {
			time.Sleep(100 * time.Millisecond) // pace retries of a failed send
			continue
		}
		_ = cli.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		var n int
		if n, err = cli.Read(buf); err == nil {
			a, perr := netip.ParseAddr(string(buf[:n]))
			if perr != nil {
				tb.Fatalf("echo from %s: %v", dst, perr)
			}
			return a
		}
	}
	tb.Fatalf("%s -> %s: no answer: %v", filepath.Base(fromNS), dst, err)
	return netip.Addr{}
}

// reportPeer answers each datagram on c with its sender's address.
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
