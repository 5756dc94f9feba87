package ops

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/mdlayher/ethernet"
	"github.com/mdlayher/ndp"
	"golang.org/x/net/bpf"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// Neighbor Discovery messages over Ethernet (RFC 4861, section 4): the
// IPv6 header, the ICMPv6 header with the flags word and the target, then
// options of 8-octet units.
const (
	etherLen    = 14
	ndpLen      = 24
	protoICMPv6 = unix.IPPROTO_ICMPV6

	icmpNS = 135 // ipv6.ICMPTypeNeighborSolicitation
	icmpNA = 136 // ipv6.ICMPTypeNeighborAdvertisement

	naRouter    = 0x80
	naSolicited = 0x40
	naOverride  = 0x20
)

var allNodes = netip.MustParseAddr("ff02::1")

// ndpPacket is one Neighbor Solicitation or Advertisement, as much of it as
// the helpers here send and look at.
type ndpPacket struct {
	typ                uint8 // icmpNS or icmpNA
	flags              uint8 // Advertisement only: naRouter, naSolicited, naOverride
	etherDst, etherSrc net.HardwareAddr
	src, dst           netip.Addr
	target             netip.Addr
	// lladdr is the source (Solicitation) or target (Advertisement)
	// link-layer address option; nil when absent.
	lladdr net.HardwareAddr
}

func (p ndpPacket) kind() string {
	if p.typ == icmpNA {
		return "neighbor advertisement"
	}
	return "neighbor solicitation"
}

// solicitation is a Neighbor Solicitation for target from mac to target's
// solicited-node group; from :: (a duplicate address probe) it carries no
// source link-layer option (RFC 4861, section 7.2.2; RFC 4862, 5.4.2).
func solicitation(mac net.HardwareAddr, sender, target netip.Addr) ndpPacket {
	group := solicitedNode(target)
	p := ndpPacket{
		typ: icmpNS, etherDst: multicastMAC(group), etherSrc: mac,
		src: sender, dst: group, target: target,
	}
	if !sender.IsUnspecified() {
		p.lladdr = mac
	}
	return p
}

// unsolicitedNA is a Neighbor Advertisement of ip at mac to all nodes.
func unsolicitedNA(mac net.HardwareAddr, ip netip.Addr) ndpPacket {
	return ndpPacket{
		typ: icmpNA, flags: naOverride, etherDst: multicastMAC(allNodes), etherSrc: mac,
		src: ip, dst: allNodes, target: ip, lladdr: mac,
	}
}

// solicitedNode returns ip's solicited-node multicast group,
// ff02::1:ffXX:XXXX with ip's low 24 bits (RFC 4291, section 2.7.1). ip is
// an IPv6 address (ndpUnicast); for any other it is the invalid address.
func solicitedNode(ip netip.Addr) netip.Addr {
	g, err := ndp.SolicitedNodeMulticast(ip)
	if err != nil {
		return netip.Addr{}
	}
	return g
}

// multicastMAC returns the Ethernet group of an IPv6 multicast address,
// 33:33 and its low 32 bits (RFC 2464, section 7).
func multicastMAC(group netip.Addr) net.HardwareAddr {
	b := group.As16()
	return net.HardwareAddr{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

// marshal returns p as an Ethernet frame, hop limit 255 and checksum set.
// Ethernet addresses and lladdr must be 6 bytes long.
func (p ndpPacket) marshal() ([]byte, error) {
	msg, err := ndp.MarshalMessageChecksum(p.message(), p.src, p.dst)
	if err != nil {
		return nil, fmt.Errorf("marshal %s for %s: %w", p.kind(), p.target, err)
	}
	// The fixed IPv6 header: x/net/ipv6 parses one but writes none (its
	// sockets leave that to the kernel), and this one has no options.
	ip := make([]byte, ipv6.HeaderLen, ipv6.HeaderLen+len(msg))
	ip[0] = 6 << 4
	binary.BigEndian.PutUint16(ip[4:6], uint16(len(msg)))
	ip[6], ip[7] = protoICMPv6, ndp.HopLimit
	copy(ip[8:24], p.src.AsSlice())
	copy(ip[24:40], p.dst.AsSlice())
	f := ethernet.Frame{Destination: p.etherDst, Source: p.etherSrc, EtherType: ethernet.EtherTypeIPv6, Payload: append(ip, msg...)}
	return f.MarshalBinary()
}

// message returns p as an ndp message, its link-layer address option, if
// any, as the first.
func (p ndpPacket) message() ndp.Message {
	var opts []ndp.Option
	if p.typ == icmpNA {
		if p.lladdr != nil {
			opts = append(opts, &ndp.LinkLayerAddress{Direction: ndp.Target, Addr: p.lladdr})
		}
		return &ndp.NeighborAdvertisement{
			Router: p.flags&naRouter != 0, Solicited: p.flags&naSolicited != 0, Override: p.flags&naOverride != 0,
			TargetAddress: p.target, Options: opts,
		}
	}
	if p.lladdr != nil {
		opts = append(opts, &ndp.LinkLayerAddress{Direction: ndp.Source, Addr: p.lladdr})
	}
	return &ndp.NeighborSolicitation{TargetAddress: p.target, Options: opts}
}

// parseNDP reads an untagged Ethernet frame carrying a valid Neighbor
// Solicitation or Advertisement (RFC 4861, sections 7.1.1 and 7.1.2: hop
// limit 255, code 0, checksum, well-formed options), without extension
// headers.
func parseNDP(b []byte) (ndpPacket, bool) {
	var f ethernet.Frame
	if err := f.UnmarshalBinary(b); err != nil || f.VLAN != nil || f.ServiceVLAN != nil || f.EtherType != ethernet.EtherTypeIPv6 {
		return ndpPacket{}, false
	}
	h, err := ipv6.ParseHeader(f.Payload)
	if err != nil || h.Version != 6 || h.NextHeader != protoICMPv6 || h.HopLimit != ndp.HopLimit ||
		h.PayloadLen < ndpLen || h.PayloadLen > len(f.Payload)-ipv6.HeaderLen {
		return ndpPacket{}, false
	}
	m := f.Payload[ipv6.HeaderLen : ipv6.HeaderLen+h.PayloadLen]
	if (m[0] != icmpNS && m[0] != icmpNA) || m[1] != 0 || !checksumOK(h.Src, h.Dst, m) {
		return ndpPacket{}, false
	}
	msg, err := ndp.ParseMessage(m)
	if err != nil {
		return ndpPacket{}, false
	}
	p := ndpPacket{
		etherDst: f.Destination, etherSrc: f.Source,
		src: netip.AddrFrom16([16]byte(h.Src)), dst: netip.AddrFrom16([16]byte(h.Dst)),
	}
	var opts []ndp.Option
	dir := ndp.Source
	switch msg := msg.(type) {
	case *ndp.NeighborSolicitation:
		p.typ, p.target, opts = icmpNS, msg.TargetAddress, msg.Options
	case *ndp.NeighborAdvertisement:
		p.typ, p.target, opts, dir = icmpNA, msg.TargetAddress, msg.Options, ndp.Target
		p.flags = flag(msg.Router, naRouter) | flag(msg.Solicited, naSolicited) | flag(msg.Override, naOverride)
	}
	for _, o := range opts {
		if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == dir {
			p.lladdr = lla.Addr
			break
		}
	}
	return p, true
}

func flag(set bool, bit uint8) uint8 {
	if set {
		return bit
	}
	return 0
}

// checksumOK reports whether ICMPv6 message m from src to dst carries its
// checksum (RFC 8200, section 8.1).
func checksumOK(src, dst net.IP, m []byte) bool {
	want := icmp.Message{Type: ipv6.ICMPType(m[0]), Code: int(m[1]), Body: &icmp.RawBody{Data: m[4:]}}
	b, err := want.Marshal(icmp.IPv6PseudoHeader(src, dst))
	return err == nil && b[2] == m[2] && b[3] == m[3]
}

// ndpFilter keeps the frames parseNDP may accept, ICMPv6 without extension
// headers, hop limit 255, type 135 or 136, so that a busy link's traffic
// does not queue on the socket.
var ndpFilter = []bpf.Instruction{
	bpf.LoadAbsolute{Off: etherLen + 6, Size: 1}, // next header
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: protoICMPv6, SkipTrue: 6},
	bpf.LoadAbsolute{Off: etherLen + 7, Size: 1}, // hop limit
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: ndp.HopLimit, SkipTrue: 4},
	bpf.LoadAbsolute{Off: etherLen + ipv6.HeaderLen, Size: 1}, // ICMPv6 type
	bpf.JumpIf{Cond: bpf.JumpLessThan, Val: icmpNS, SkipTrue: 2},
	bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: icmpNA, SkipTrue: 1},
	bpf.RetConstant{Val: 0xffff},
	bpf.RetConstant{Val: 0},
}
