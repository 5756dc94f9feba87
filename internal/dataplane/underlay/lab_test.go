package underlay

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/daemon/podnet"
	"github.com/estuary-cni/estuary/internal/dataplane/nstest"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
	"github.com/estuary-cni/estuary/internal/nsrun"
)

// lab is one node on an untagged segment (a bridge in its own namespace)
// with a router, the pod subnet's gateway, and an external host behind it.
//
//	pod (192.168.60.5/32) -- node eth0 192.168.50.11/24 --+
//	                                                      switch
//	ext 10.200.0.10 -- gw eth1 10.200.0.1 | gw eth0 192.168.60.1/24, 192.168.50.1/24
type lab struct {
	sw, node, gw, ext, pod string
	hostVeth               string
	agent                  *Agent
}

var (
	podSubnet = netip.MustParsePrefix("192.168.60.0/24")
	podIP     = netip.MustParseAddr("192.168.60.5")
	gwIP      = netip.MustParseAddr("192.168.60.1")
	nodeIP    = netip.MustParseAddr("192.168.50.11")
	extIP     = netip.MustParseAddr("10.200.0.10")
)

func run(tb testing.TB, name string, args ...string) string {
	tb.Helper()
	out, err := exec.Command(name, args...).CombinedOutput() // #nosec G204 -- test commands
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// ipn runs `ip -n <ns> args...`.
func ipn(tb testing.TB, ns string, args ...string) string {
	tb.Helper()
	return run(tb, "ip", append([]string{"-n", filepath.Base(ns)}, args...)...)
}

func nsExec(tb testing.TB, ns string, args ...string) string {
	tb.Helper()
	return run(tb, "ip", append([]string{"netns", "exec", filepath.Base(ns)}, args...)...)
}

// plug connects ns to the switch with a veth eth0 <-> sw-<tag>.
func (l *lab) plug(t *testing.T, ns, tag string, addrs ...string) {
	t.Helper()
	ipn(t, ns, "link", "set", "lo", "up")
	ipn(t, ns, "link", "add", "eth0", "type", "veth", "peer", "name", "sw-"+tag, "netns", filepath.Base(l.sw))
	ipn(t, l.sw, "link", "set", "sw-"+tag, "master", "br0", "up")
	ipn(t, ns, "link", "set", "eth0", "up")
	for _, a := range addrs {
		ipn(t, ns, "addr", "add", a, "dev", "eth0")
	}
}

func newLab(t *testing.T) *lab {
	t.Helper()
	nstest.RequireRoot(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	l := &lab{sw: nstest.New(t), node: nstest.New(t), gw: nstest.New(t), ext: nstest.New(t)}
	ipn(t, l.sw, "link", "add", "br0", "type", "bridge")
	ipn(t, l.sw, "link", "set", "br0", "up")
	l.plug(t, l.node, "node", nodeIP.String()+"/24")
	ipn(t, l.node, "route", "add", "default", "via", "192.168.50.1")
	l.plug(t, l.gw, "gw", gwIP.String()+"/24", "192.168.50.1/24")
	ipn(t, l.gw, "link", "add", "eth1", "type", "veth", "peer", "name", "eth0", "netns", filepath.Base(l.ext))
	ipn(t, l.gw, "addr", "add", "10.200.0.1/24", "dev", "eth1")
	ipn(t, l.gw, "link", "set", "eth1", "up")
	nsExec(t, l.gw, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	ipn(t, l.ext, "link", "set", "lo", "up")
	ipn(t, l.ext, "addr", "add", extIP.String()+"/24", "dev", "eth0")
	ipn(t, l.ext, "link", "set", "eth0", "up")
	ipn(t, l.ext, "route", "add", "default", "via", "10.200.0.1")
	l.plumbPod(t)
	agent, err := NewAgent(l.node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)
	l.agent = agent
	return l
}

// plumbPod plumbs one pod on the node with podnet: veth, /32, default via
// 169.254.1.1 with a permanent neighbour, table 1000.
func (l *lab) plumbPod(t *testing.T) {
	t.Helper()
	static := podnet.NewStatic()
	static.Set("default", "pod-u", podnet.Address{IP: netip.PrefixFrom(podIP, podSubnet.Bits()), Gateway: gwIP, Family: state.IPv4})
	b, err := podnet.New(podnet.Config{HostNetns: l.node, Addresses: static, AddressTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	l.pod = nstest.New(t)
	att := cniserver.Attachment{
		ContainerID: "c-u", IfName: "eth0", Netns: l.pod,
		PodNamespace: "default", PodName: "pod-u", PodUID: "uid-u",
	}
	if _, err := b.Add(context.Background(), att); err != nil {
		t.Fatalf("plumb pod: %v", err)
	}
	l.hostVeth = podnet.HostVethName(att)
}

func (l *lab) input(pods ...netip.Addr) Input {
	return Input{
		Uplink: "eth0",
		Networks: []Network{{Name: "vlan0", VLAN: 0, Subnets: []Subnet{{
			Name: "vlan0-a", CIDR: podSubnet, Gateway: gwIP, LocalPods: pods,
		}}}},
		Cluster: []SubnetRef{{Name: "vlan0-a", CIDR: podSubnet, Created: time.Unix(1, 0)}},
	}
}

// peer sends datagrams from fromNS to dst, answered by a socket bound to
// dst in holder with the sender's address as it saw it, and returns it.
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
	go func() {
		buf := make([]byte, 64)
		for {
			_, from, err := srv.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			_, _ = srv.WriteToUDPAddrPort([]byte(from.Addr().Unmap().String()), from)
		}
	}()
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
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); {
		if _, err = cli.Write([]byte("who")); err != nil {
			time.Sleep(100 * time.Millisecond)
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

// arpPacket is one ARP packet seen on a link.
type arpPacket struct {
	op             uint16
	sender, target netip.Addr
	senderMAC      string
}

// captureARP records the ARP packets that reach dev in ns while fn runs.
func captureARP(t *testing.T, ns, dev string, fn func()) []arpPacket {
	t.Helper()
	var fd int
	if err := nsrun.Do(ns, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		proto := int(htons(unix.ETH_P_ARP))
		if fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, proto); err != nil {
			return err
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: ifi.Index})
	}); err != nil {
		t.Fatalf("capture on %s: %v", dev, err)
	}
	tv := unix.NsecToTimeval((200 * time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		got  []arpPacket
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		buf := make([]byte, 1500)
		for {
			select {
			case <-done:
				return
			default:
			}
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil || n < 14+28 {
				continue
			}
			a := buf[14:]
			p := arpPacket{
				op:        binary.BigEndian.Uint16(a[6:8]),
				senderMAC: net.HardwareAddr(a[8:14]).String(),
				sender:    netip.AddrFrom4([4]byte(a[14:18])),
				target:    netip.AddrFrom4([4]byte(a[24:28])),
			}
			mu.Lock()
			got = append(got, p)
			mu.Unlock()
		}
	})
	fn()
	close(done)
	wg.Wait()
	_ = unix.Close(fd)
	return got
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
