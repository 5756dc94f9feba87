package ops

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/packet"

	"github.com/estuary-cni/estuary/internal/nsrun"
)

// arpEthernet is ARP's hardware type for Ethernet (RFC 826).
const arpEthernet = 1

// arpPacket is the part of an ARP packet the helpers below look at.
type arpPacket struct {
	op             arp.Operation
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
	if err := s.send(arp.OperationRequest, ip, ip); err != nil {
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
	send := func() error { return s.send(arp.OperationRequest, sender, target) }
	return askUntil(ctx, wait, send, func(d time.Duration) (net.HardwareAddr, error) {
		p, ok, err := s.recv(d)
		if err != nil || !ok || bytes.Equal(p.senderMAC, s.mac) {
			return nil, err
		}
		// Whoever sends from target holds it; while probing, so does a host
		// probing for target itself (RFC 5227, section 2.1.1).
		holder := p.sender == target
		rival := sender.IsUnspecified() && p.op == arp.OperationRequest && p.sender.IsUnspecified() && p.target == target
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
	c   *packet.Conn
	mac net.HardwareAddr
	buf []byte
}

// arpSocket opens a packet socket in the handle's namespace, bound to dev.
func (h *Segment) arpSocket(dev string) (*arpSock, error) {
	c, ifi, err := h.packetSocket(dev, ethernet.EtherTypeARP, nil)
	if err != nil {
		return nil, err
	}
	return &arpSock{c: c, mac: ifi.HardwareAddr, buf: make([]byte, 256)}, nil
}

// packetSocket opens a raw packet socket in the handle's namespace, bound
// to dev for frames of type proto that pass cfg's filter, and returns it
// with dev (its index and Ethernet address). The socket stays in that
// namespace.
func (h *Segment) packetSocket(dev string, proto ethernet.EtherType, cfg *packet.Config) (*packet.Conn, *net.Interface, error) {
	link, err := h.nl.LinkByName(dev)
	if err != nil {
		return nil, nil, fmt.Errorf("link %s: %w", dev, err)
	}
	a := link.Attrs()
	if len(a.HardwareAddr) != 6 {
		return nil, nil, fmt.Errorf("link %s: no Ethernet address", dev)
	}
	ifi := &net.Interface{Index: a.Index, Name: a.Name, MTU: a.MTU, HardwareAddr: a.HardwareAddr}
	var c *packet.Conn
	err = nsrun.Do(h.ns, func() error {
		var lerr error
		if c, lerr = packet.Listen(ifi, packet.Raw, int(proto), cfg); lerr != nil {
			return fmt.Errorf("packet socket on %s: %w", dev, lerr)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return c, ifi, nil
}

// readFrame waits up to d for one frame on c and returns its length, 0
// when none came.
func readFrame(c *packet.Conn, buf []byte, d time.Duration) (int, error) {
	if d <= 0 {
		return 0, nil
	}
	if err := c.SetReadDeadline(time.Now().Add(max(d, time.Millisecond))); err != nil {
		return 0, fmt.Errorf("socket deadline: %w", err)
	}
	n, _, err := c.ReadFrom(buf)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return 0, nil
	}
	return n, err
}

func (s *arpSock) close() { _ = s.c.Close() }

func (s *arpSock) send(op arp.Operation, sender, target netip.Addr) error {
	f, err := arpFrame(op, s.mac, sender, target)
	if err == nil {
		_, err = s.c.WriteTo(f, &packet.Addr{HardwareAddr: ethernet.Broadcast})
	}
	if err != nil {
		return fmt.Errorf("send arp: %w", err)
	}
	return nil
}

// arpFrame is the broadcast Ethernet frame of an ARP packet from mac, its
// target hardware address unknown (zero).
func arpFrame(op arp.Operation, mac net.HardwareAddr, sender, target netip.Addr) ([]byte, error) {
	p, err := arp.NewPacket(op, mac, sender, make(net.HardwareAddr, 6), target)
	if err != nil {
		return nil, err
	}
	pb, err := p.MarshalBinary()
	if err != nil {
		return nil, err
	}
	f := ethernet.Frame{Destination: ethernet.Broadcast, Source: mac, EtherType: ethernet.EtherTypeARP, Payload: pb}
	return f.MarshalBinary()
}

// recv waits up to d for one ARP packet; ok is false when none came.
func (s *arpSock) recv(d time.Duration) (arpPacket, bool, error) {
	n, err := readFrame(s.c, s.buf, d)
	if err != nil {
		return arpPacket{}, false, fmt.Errorf("receive arp: %w", err)
	}
	if n == 0 {
		return arpPacket{}, false, nil
	}
	p, ok := parseARP(s.buf[:n])
	return p, ok, nil
}

// parseARP reads an untagged Ethernet frame carrying IPv4-over-Ethernet
// ARP (hardware type Ethernet, protocol IPv4). A frame whose sender
// hardware address is a group (multicast, broadcast) or the all-zero
// address is refused: no station has it, and a host must not believe one
// (RFC 1812, section 3.3.2), so it is nobody's answer.
func parseARP(b []byte) (arpPacket, bool) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(b); err != nil || f.VLAN != nil || f.ServiceVLAN != nil || f.EtherType != ethernet.EtherTypeARP {
		return arpPacket{}, false
	}
	var p arp.Packet
	if err := p.UnmarshalBinary(f.Payload); err != nil {
		return arpPacket{}, false
	}
	if p.HardwareType != arpEthernet || p.ProtocolType != uint16(ethernet.EtherTypeIPv4) ||
		p.HardwareAddrLength != 6 || p.IPLength != 4 {
		return arpPacket{}, false
	}
	if p.SenderHardwareAddr[0]&1 == 1 || bytes.Equal(p.SenderHardwareAddr, make([]byte, 6)) {
		return arpPacket{}, false
	}
	return arpPacket{op: p.Operation, senderMAC: p.SenderHardwareAddr, sender: p.SenderIP, target: p.TargetIP}, true
}
