package ops

import (
	"encoding/binary"
	"net"
	"net/netip"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Neighbor Discovery messages over Ethernet (RFC 4861, section 4): the
// IPv6 header, the ICMPv6 header with the flags word and the target, then
// options of 8-octet units.
const (
	ipv6Len      = 40
	ndpLen       = 24
	lladdrOptLen = 8
	ndpHopLimit  = 255

	icmpNS = 135
	icmpNA = 136

	optSourceLL = 1
	optTargetLL = 2

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
// ff02::1:ffXX:XXXX with ip's low 24 bits (RFC 4291, section 2.7.1).
func solicitedNode(ip netip.Addr) netip.Addr {
	b := ip.As16()
	return netip.AddrFrom16([16]byte{0: 0xff, 1: 0x02, 11: 0x01, 12: 0xff, 13: b[13], 14: b[14], 15: b[15]})
}

// multicastMAC returns the Ethernet group of an IPv6 multicast address,
// 33:33 and its low 32 bits (RFC 2464, section 7).
func multicastMAC(group netip.Addr) net.HardwareAddr {
	b := group.As16()
	return net.HardwareAddr{0x33, 0x33, b[12], b[13], b[14], b[15]}
}

// marshal returns p as an Ethernet frame, hop limit 255 and checksum set.
// Ethernet addresses and lladdr must be 6 bytes long.
func (p ndpPacket) marshal() []byte {
	n := ndpLen
	if p.lladdr != nil {
		n += lladdrOptLen
	}
	f := make([]byte, etherLen+ipv6Len+n)
	copy(f[0:6], p.etherDst)
	copy(f[6:12], p.etherSrc)
	binary.BigEndian.PutUint16(f[12:14], unix.ETH_P_IPV6)
	ip := f[etherLen:]
	ip[0] = 0x60
	binary.BigEndian.PutUint16(ip[4:6], uint16(n))
	ip[6], ip[7] = unix.IPPROTO_ICMPV6, ndpHopLimit
	src, dst, target := p.src.As16(), p.dst.As16(), p.target.As16()
	copy(ip[8:24], src[:])
	copy(ip[24:40], dst[:])
	m := ip[ipv6Len:]
	m[0] = p.typ
	m[4] = p.flags
	copy(m[8:24], target[:])
	if p.lladdr != nil {
		m[24], m[25] = optSourceLL, 1
		if p.typ == icmpNA {
			m[24] = optTargetLL
		}
		copy(m[26:32], p.lladdr)
	}
	binary.BigEndian.PutUint16(m[2:4], icmpv6Checksum(src, dst, m))
	return f
}

// parseNDP reads an Ethernet frame carrying a valid Neighbor Solicitation
// or Advertisement (RFC 4861, sections 7.1.1 and 7.1.2: hop limit 255,
// code 0, checksum, well-formed options), without extension headers.
func parseNDP(f []byte) (ndpPacket, bool) {
	if len(f) < etherLen+ipv6Len+ndpLen || binary.BigEndian.Uint16(f[12:14]) != unix.ETH_P_IPV6 {
		return ndpPacket{}, false
	}
	ip := f[etherLen:]
	n := int(binary.BigEndian.Uint16(ip[4:6]))
	if ip[0]>>4 != 6 || ip[6] != unix.IPPROTO_ICMPV6 || ip[7] != ndpHopLimit || n < ndpLen || n > len(ip)-ipv6Len {
		return ndpPacket{}, false
	}
	src, dst := [16]byte(ip[8:24]), [16]byte(ip[24:40])
	m := ip[ipv6Len : ipv6Len+n]
	if (m[0] != icmpNS && m[0] != icmpNA) || m[1] != 0 || icmpv6Checksum(src, dst, m) != 0 {
		return ndpPacket{}, false
	}
	p := ndpPacket{
		typ:      m[0],
		etherDst: net.HardwareAddr(append([]byte(nil), f[0:6]...)),
		etherSrc: net.HardwareAddr(append([]byte(nil), f[6:12]...)),
		src:      netip.AddrFrom16(src),
		dst:      netip.AddrFrom16(dst),
		target:   netip.AddrFrom16([16]byte(m[8:24])),
	}
	opt := byte(optSourceLL)
	if p.typ == icmpNA {
		p.flags = m[4] & (naRouter | naSolicited | naOverride)
		opt = optTargetLL
	}
	lladdr, ok := lladdrOption(m[ndpLen:], opt)
	p.lladdr = lladdr
	return p, ok
}

// lladdrOption returns the Ethernet address in the first option of type
// want, nil when there is none, and false when the options are malformed:
// one of length zero or running past the end (RFC 4861, section 4.6).
func lladdrOption(opts []byte, want byte) (net.HardwareAddr, bool) {
	var mac net.HardwareAddr
	for len(opts) > 0 {
		if len(opts) < 2 || opts[1] == 0 || int(opts[1])*8 > len(opts) {
			return nil, false
		}
		l := int(opts[1]) * 8
		if opts[0] == want && l == lladdrOptLen && mac == nil {
			mac = net.HardwareAddr(append([]byte(nil), opts[2:8]...))
		}
		opts = opts[l:]
	}
	return mac, true
}

// icmpv6Checksum is the Internet checksum of msg under the IPv6
// pseudo-header (RFC 8200, section 8.1). Over a message whose checksum
// field is zero it is the field's value; over one already carrying a
// correct checksum it is 0.
func icmpv6Checksum(src, dst [16]byte, msg []byte) uint16 {
	var sum uint32
	add := func(b []byte) {
		for i := 0; i+1 < len(b); i += 2 {
			sum += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			sum += uint32(b[len(b)-1]) << 8
		}
	}
	add(src[:])
	add(dst[:])
	sum += uint32(len(msg)>>16) + uint32(len(msg)&0xffff) + unix.IPPROTO_ICMPV6
	add(msg)
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}

// ndpFilter keeps the frames parseNDP may accept, ICMPv6 without extension
// headers, hop limit 255, type 135 or 136, so that a busy link's traffic
// does not queue on the socket.
var ndpFilter = []bpf.Instruction{
	bpf.LoadAbsolute{Off: etherLen + 6, Size: 1}, // next header
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: unix.IPPROTO_ICMPV6, SkipTrue: 6},
	bpf.LoadAbsolute{Off: etherLen + 7, Size: 1}, // hop limit
	bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: ndpHopLimit, SkipTrue: 4},
	bpf.LoadAbsolute{Off: etherLen + ipv6Len, Size: 1}, // ICMPv6 type
	bpf.JumpIf{Cond: bpf.JumpLessThan, Val: icmpNS, SkipTrue: 2},
	bpf.JumpIf{Cond: bpf.JumpGreaterThan, Val: icmpNA, SkipTrue: 1},
	bpf.RetConstant{Val: 0xffff},
	bpf.RetConstant{Val: 0},
}
