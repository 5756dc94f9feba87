package ops

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/nsrun"
)

// ARP opcodes and frame layout (RFC 826 over Ethernet).
const (
	arpRequest  = 1
	arpEthernet = 1 // hardware type
	arpLen      = 28
	etherLen    = 14
)

var broadcastMAC = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// arpPacket is the part of an ARP packet the helpers below look at.
type arpPacket struct {
	op             uint16
	senderMAC      net.HardwareAddr
	sender, target netip.Addr
}

// GratuitousARP broadcasts one ARP announcement for ip on dev (RFC 5227:
// a request with sender and target ip, from dev's MAC), so that the
// segment's hosts and switches that cache ip point it at this link, for
// instance after a pod with a fixed address moved to this node. Hosts
// that hold no entry for ip do not create one (unless their arp_accept
// says so); this only refreshes caches.
func (h *Segment) GratuitousARP(dev string, ip netip.Addr) error {
	if !ip.Is4() {
		return fmt.Errorf("gratuitous arp %s on %s: not an IPv4 address", ip, dev)
	}
	s, err := h.arpSocket(dev)
	if err != nil {
		return fmt.Errorf("gratuitous arp %s on %s: %w", ip, dev, err)
	}
	defer s.close()
	if err := s.send(arpRequest, ip, ip); err != nil {
		return fmt.Errorf("gratuitous arp %s on %s: %w", ip, dev, err)
	}
	return nil
}

// ARPProbe asks the segment on dev whether anyone holds ip (RFC 5227
// duplicate address detection: a request with sender 0.0.0.0, which no
// host caches) and returns the MAC of a host other than dev that answered
// or announced ip within wait, or nil when none did. A probe is sent at
// the start and then every 200 ms.
func (h *Segment) ARPProbe(ctx context.Context, dev string, ip netip.Addr, wait time.Duration) (net.HardwareAddr, error) {
	mac, err := h.arpAsk(ctx, dev, netip.IPv4Unspecified(), ip, wait)
	if err != nil {
		return nil, fmt.Errorf("arp probe %s on %s: %w", ip, dev, err)
	}
	return mac, nil
}

// ARPResolve asks the segment on dev for target's MAC with sender as the
// request's sender address (for example a pod's gateway, asked on behalf
// of the pod) and returns the MAC that answered, or nil when nothing did
// within wait.
func (h *Segment) ARPResolve(ctx context.Context, dev string, sender, target netip.Addr, wait time.Duration) (net.HardwareAddr, error) {
	if !sender.Is4() {
		return nil, fmt.Errorf("arp resolve %s on %s: sender %s is not an IPv4 address", target, dev, sender)
	}
	mac, err := h.arpAsk(ctx, dev, sender, target, wait)
	if err != nil {
		return nil, fmt.Errorf("arp resolve %s on %s: %w", target, dev, err)
	}
	return mac, nil
}

func (h *Segment) arpAsk(ctx context.Context, dev string, sender, target netip.Addr, wait time.Duration) (net.HardwareAddr, error) {
	if !target.Is4() {
		return nil, fmt.Errorf("%s is not an IPv4 address", target)
	}
	s, err := h.arpSocket(dev)
	if err != nil {
		return nil, err
	}
	defer s.close()
	send := func() error { return s.send(arpRequest, sender, target) }
	return askUntil(ctx, wait, send, func(d time.Duration) (net.HardwareAddr, error) {
		p, ok, err := s.recv(d)
		if err != nil || !ok || bytes.Equal(p.senderMAC, s.mac) {
			return nil, err
		}
		// Whoever sends from target holds it; while probing, so does a host
		// probing for target itself (RFC 5227, section 2.1.1).
		holder := p.sender == target
		rival := sender.IsUnspecified() && p.op == arpRequest && p.sender.IsUnspecified() && p.target == target
		if holder || rival {
			return p.senderMAC, nil
		}
		return nil, nil
	})
}

// askInterval is how often askUntil repeats its question.
const askInterval = 200 * time.Millisecond

// askUntil sends a question at once and every askInterval, and in between
// reads answers with recv (which returns the holder's MAC, or nil for a
// frame that is not an answer or for no frame within the time it is
// given), until an answer comes, wait passes or ctx ends. No answer is
// nil, nil.
func askUntil(ctx context.Context, wait time.Duration, send func() error,
	recv func(time.Duration) (net.HardwareAddr, error)) (net.HardwareAddr, error) {
	deadline := time.Now().Add(wait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var next time.Time
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !time.Now().Before(next) {
			if err := send(); err != nil {
				return nil, err
			}
			next = time.Now().Add(askInterval)
		}
		if mac, err := recv(min(time.Until(next), time.Until(deadline))); err != nil || mac != nil {
			return mac, err
		}
	}
	return nil, nil
}

// arpSock is a packet socket bound to one link for ARP frames.
type arpSock struct {
	fd    int
	index int
	mac   net.HardwareAddr
}

// arpSocket opens a packet socket in the handle's namespace, bound to dev.
func (h *Segment) arpSocket(dev string) (*arpSock, error) {
	fd, index, mac, err := h.packetSocket(dev, unix.ETH_P_ARP)
	if err != nil {
		return nil, err
	}
	s := &arpSock{fd: fd, index: index, mac: mac}
	if err := unix.Bind(s.fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: s.index}); err != nil {
		s.close()
		return nil, fmt.Errorf("bind packet socket to %s: %w", dev, err)
	}
	return s, nil
}

// packetSocket opens an unbound packet socket for protocol proto (0
// receives nothing until bound) in the handle's namespace, and returns it
// with dev's index and Ethernet address.
func (h *Segment) packetSocket(dev string, proto uint16) (fd, index int, mac net.HardwareAddr, err error) {
	link, err := h.nl.LinkByName(dev)
	if err != nil {
		return -1, 0, nil, fmt.Errorf("link %s: %w", dev, err)
	}
	a := link.Attrs()
	if len(a.HardwareAddr) != 6 {
		return -1, 0, nil, fmt.Errorf("link %s: no Ethernet address", dev)
	}
	fd = -1
	err = nsrun.Do(h.ns, func() error {
		var serr error
		if fd, serr = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(htons(proto))); serr != nil {
			return fmt.Errorf("packet socket: %w", serr)
		}
		return nil
	})
	if err != nil {
		return -1, 0, nil, err
	}
	return fd, a.Index, a.HardwareAddr, nil
}

func (s *arpSock) close() { _ = unix.Close(s.fd) }

func (s *arpSock) send(op uint16, sender, target netip.Addr) error {
	f := make([]byte, etherLen+arpLen)
	copy(f[0:6], broadcastMAC)
	copy(f[6:12], s.mac)
	binary.BigEndian.PutUint16(f[12:14], unix.ETH_P_ARP)
	a := f[etherLen:]
	binary.BigEndian.PutUint16(a[0:2], arpEthernet)
	binary.BigEndian.PutUint16(a[2:4], unix.ETH_P_IP)
	a[4], a[5] = 6, 4
	binary.BigEndian.PutUint16(a[6:8], op)
	copy(a[8:14], s.mac)
	s4, t4 := sender.As4(), target.As4()
	copy(a[14:18], s4[:])
	copy(a[24:28], t4[:])
	to := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ARP), Ifindex: s.index, Halen: 6}
	copy(to.Addr[:], broadcastMAC)
	if err := unix.Sendto(s.fd, f, 0, to); err != nil {
		return fmt.Errorf("send arp: %w", err)
	}
	return nil
}

// recv waits up to d for one ARP packet; ok is false when none came.
func (s *arpSock) recv(d time.Duration) (arpPacket, bool, error) {
	if d <= 0 {
		return arpPacket{}, false, nil
	}
	tv := unix.NsecToTimeval(max(d, time.Millisecond).Nanoseconds())
	if err := unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return arpPacket{}, false, fmt.Errorf("arp socket timeout: %w", err)
	}
	buf := make([]byte, 256)
	n, _, err := unix.Recvfrom(s.fd, buf, 0)
	if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
		return arpPacket{}, false, nil
	}
	if err != nil {
		return arpPacket{}, false, fmt.Errorf("receive arp: %w", err)
	}
	p, ok := parseARP(buf[:n])
	return p, ok, nil
}

// parseARP reads an Ethernet frame carrying IPv4-over-Ethernet ARP
// (hardware type Ethernet, protocol IPv4). A frame whose sender hardware
// address is a group (multicast, broadcast) or the all-zero address is
// refused: no station has it, and a host must not believe one (RFC 1812,
// section 3.3.2), so it is nobody's answer.
func parseARP(f []byte) (arpPacket, bool) {
	if len(f) < etherLen+arpLen || binary.BigEndian.Uint16(f[12:14]) != unix.ETH_P_ARP {
		return arpPacket{}, false
	}
	a := f[etherLen:]
	if binary.BigEndian.Uint16(a[0:2]) != arpEthernet || binary.BigEndian.Uint16(a[2:4]) != unix.ETH_P_IP || a[4] != 6 || a[5] != 4 {
		return arpPacket{}, false
	}
	if a[8]&1 == 1 || bytes.Equal(a[8:14], make([]byte, 6)) {
		return arpPacket{}, false
	}
	return arpPacket{
		op:        binary.BigEndian.Uint16(a[6:8]),
		senderMAC: net.HardwareAddr(append([]byte(nil), a[8:14]...)),
		sender:    netip.AddrFrom4([4]byte(a[14:18])),
		target:    netip.AddrFrom4([4]byte(a[24:28])),
	}, true
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
