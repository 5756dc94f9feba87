package underlay

import (
	"encoding/binary"
	"net"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/nstest/nspod"
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

func newLab(t *testing.T) *lab {
	t.Helper()
	l := &lab{sw: nstest.NewSwitch(t)}
	l.node, l.gw, l.ext = nstest.New(t), nstest.New(t), nstest.New(t)
	nstest.Plug(t, l.sw, l.node, "node", nodeIP.String()+"/24")
	nstest.IP(t, l.node, "route", "add", "default", "via", "192.168.50.1")
	nstest.Plug(t, l.sw, l.gw, "gw", gwIP.String()+"/24", "192.168.50.1/24")
	nstest.IP(t, l.gw, "link", "add", "eth1", "type", "veth", "peer", "name", "eth0", "netns", filepath.Base(l.ext))
	nstest.IP(t, l.gw, "addr", "add", "10.200.0.1/24", "dev", "eth1")
	nstest.IP(t, l.gw, "link", "set", "eth1", "up")
	nstest.Exec(t, l.gw, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	nstest.IP(t, l.ext, "link", "set", "lo", "up")
	nstest.IP(t, l.ext, "addr", "add", extIP.String()+"/24", "dev", "eth0")
	nstest.IP(t, l.ext, "link", "set", "eth0", "up")
	nstest.IP(t, l.ext, "route", "add", "default", "via", "10.200.0.1")
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
	l.pod, l.hostVeth = nspod.Plumb(t, l.node, "u",
		podIP)
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
