package ops

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// UnsolicitedNA sends one unsolicited Neighbor Advertisement for ip on dev
// to all nodes (RFC 4861, section 7.2.6: override set, solicited clear,
// dev's MAC as target link-layer address, ip as source), so that the
// segment's hosts that cache ip point it at this link, for instance after
// a pod with a fixed address moved to this node. Hosts that hold no entry
// for ip do not create one (unless they forward and their
// accept_untracked_na says so, RFC 9131); this only refreshes caches.
func (h *Segment) UnsolicitedNA(dev string, ip netip.Addr) error {
	if !ndpUnicast(ip) {
		return fmt.Errorf("unsolicited na %s on %s: not an IPv6 unicast address", ip, dev)
	}
	s, err := h.ndpSocket(dev)
	if err != nil {
		return fmt.Errorf("unsolicited na %s on %s: %w", ip, dev, err)
	}
	defer s.close()
	if err := s.send(unsolicitedNA(s.mac, ip)); err != nil {
		return fmt.Errorf("unsolicited na %s on %s: %w", ip, dev, err)
	}
	return nil
}

// NDPProbe asks the segment on dev whether anyone holds ip (RFC 4862
// duplicate address detection: a Neighbor Solicitation from ::, which no
// host caches, to ip's solicited-node group) and returns the MAC of a host
// other than dev that advertised ip, or probed for it too, within wait, or
// nil when none did. A probe is sent at the start and then every 200 ms.
func (h *Segment) NDPProbe(ctx context.Context, dev string, ip netip.Addr, wait time.Duration) (net.HardwareAddr, error) {
	mac, err := h.ndpAsk(ctx, dev, netip.IPv6Unspecified(), ip, wait)
	if err != nil {
		return nil, fmt.Errorf("ndp probe %s on %s: %w", ip, dev, err)
	}
	return mac, nil
}

// NDPResolve asks the segment on dev for target's MAC with a Neighbor
// Solicitation from sender (for example a pod's gateway, asked on behalf
// of the pod; the target learns sender at dev's MAC) and returns the MAC
// that answered, or nil when nothing did within wait.
func (h *Segment) NDPResolve(ctx context.Context, dev string, sender, target netip.Addr, wait time.Duration) (net.HardwareAddr, error) {
	if !ndpUnicast(sender) {
		return nil, fmt.Errorf("ndp resolve %s on %s: sender %s is not an IPv6 unicast address", target, dev, sender)
	}
	mac, err := h.ndpAsk(ctx, dev, sender, target, wait)
	if err != nil {
		return nil, fmt.Errorf("ndp resolve %s on %s: %w", target, dev, err)
	}
	return mac, nil
}

func (h *Segment) ndpAsk(ctx context.Context, dev string, sender, target netip.Addr, wait time.Duration) (net.HardwareAddr, error) {
	if !ndpUnicast(target) {
		return nil, fmt.Errorf("%s is not an IPv6 unicast address", target)
	}
	s, err := h.ndpSocket(dev)
	if err != nil {
		return nil, err
	}
	defer s.close()
	if sender.IsUnspecified() {
		// Hear other hosts' probes for target, as a host doing duplicate
		// address detection does (RFC 4862, section 5.4.2).
		if err := s.join(solicitedNode(target)); err != nil {
			return nil, err
		}
	}
	send := func() error { return s.send(solicitation(s.mac, sender, target)) }
	return askUntil(ctx, wait, send, func(d time.Duration) (net.HardwareAddr, error) {
		p, ok, err := s.recv(d)
		if err != nil || !ok || bytes.Equal(p.etherSrc, s.mac) {
			return nil, err
		}
		return holderOf(p, sender, target), nil
	})
}

// holderOf returns the MAC of the host that p shows holding target, or nil.
// Whoever advertises target or solicits from it holds it; while probing
// (sender ::), so does a host probing for target itself (RFC 4862, section
// 5.4.3).
func holderOf(p ndpPacket, sender, target netip.Addr) net.HardwareAddr {
	holder := (p.typ == icmpNA && p.target == target) || (p.typ == icmpNS && p.src == target)
	rival := sender.IsUnspecified() && p.typ == icmpNS && p.src.IsUnspecified() && p.target == target
	if !holder && !rival {
		return nil
	}
	if p.lladdr != nil {
		return p.lladdr
	}
	return p.etherSrc
}

// ndpUnicast reports whether ip is an IPv6 address a host can hold.
func ndpUnicast(ip netip.Addr) bool {
	return ip.Is6() && !ip.Is4In6() && !ip.IsUnspecified() && !ip.IsMulticast() && !ip.IsLoopback()
}

// ndpSock is a packet socket bound to one link that receives only Neighbor
// Solicitations and Advertisements.
//
// It is a raw packet socket, not mdlayher/ndp's Conn: that is an ICMPv6
// socket, whose kernel sends from an address the namespace holds, while a
// duplicate address probe must come from :: (the kernel picks a source of
// its own instead) and a resolution on a pod's behalf from the pod's
// address, which the namespace asking does not hold; neither does it
// show a message's Ethernet source, by which a probe's own echo is told
// apart. ndp's message types write and read the messages inside.
type ndpSock struct {
	c     *packet.Conn
	index int
	mac   net.HardwareAddr
	buf   []byte
}

// ndpSocket opens a packet socket in the handle's namespace, bound to dev,
// its filter attached before it is bound, so no other frame is queued.
func (h *Segment) ndpSocket(dev string) (*ndpSock, error) {
	filter, err := bpf.Assemble(ndpFilter)
	if err != nil {
		return nil, fmt.Errorf("assemble ndp filter: %w", err)
	}
	c, ifi, err := h.packetSocket(dev, ethernet.EtherTypeIPv6, &packet.Config{Filter: filter})
	if err != nil {
		return nil, err
	}
	return &ndpSock{c: c, index: ifi.Index, mac: ifi.HardwareAddr, buf: make([]byte, 2048)}, nil
}

func (s *ndpSock) close() { _ = s.c.Close() }

// join makes the link accept frames for the multicast group while the
// socket is open (packet(7) PACKET_ADD_MEMBERSHIP, which mdlayher/packet
// does not wrap).
func (s *ndpSock) join(group netip.Addr) error {
	rc, err := s.c.SyscallConn()
	if err != nil {
		return fmt.Errorf("join %s: %w", group, err)
	}
	mr := unix.PacketMreq{Ifindex: int32(s.index), Type: unix.PACKET_MR_MULTICAST, Alen: 6}
	copy(mr.Address[:], multicastMAC(group))
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptPacketMreq(int(fd), unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mr)
	}); err != nil {
		serr = err
	}
	if serr != nil {
		return fmt.Errorf("join %s: %w", group, serr)
	}
	return nil
}

func (s *ndpSock) send(p ndpPacket) error {
	f, err := p.marshal()
	if err == nil {
		_, err = s.c.WriteTo(f, &packet.Addr{HardwareAddr: p.etherDst})
	}
	if err != nil {
		return fmt.Errorf("send %s for %s: %w", p.kind(), p.target, err)
	}
	return nil
}

// recv waits up to d for one NDP packet; ok is false when none came.
func (s *ndpSock) recv(d time.Duration) (ndpPacket, bool, error) {
	n, err := readFrame(s.c, s.buf, d)
	if err != nil {
		return ndpPacket{}, false, fmt.Errorf("receive ndp: %w", err)
	}
	if n == 0 {
		return ndpPacket{}, false, nil
	}
	p, ok := parseNDP(s.buf[:n])
	return p, ok, nil
}
