package policydrops

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// IP protocol numbers the parser names.
const (
	protoICMP   = 1
	protoTCP    = 6
	protoUDP    = 17
	protoICMPv6 = 58
	protoSCTP   = 132
)

// maxExtHeaders bounds the IPv6 extension headers the parser walks.
const maxExtHeaders = 8

// ParseDroppedPacket makes a Drop of one netlink log message: its prefix
// (LogPrefix) and the packet from its network header on, as the kernel
// copied it (possibly truncated past the transport ports).
func ParseDroppedPacket(prefix string, packet []byte, at time.Time) (Drop, error) {
	dir, veth, pol, err := ParsePrefix(prefix)
	if err != nil {
		return Drop{}, err
	}
	d := Drop{Time: at, Direction: dir, HostVeth: veth, Policy: pol}
	if err := parseIP(packet, &d); err != nil {
		return Drop{}, fmt.Errorf("drop logged as %q: %w", prefix, err)
	}
	return d, nil
}

// parseIP fills d's protocol, addresses and ports from an IPv4 or IPv6
// packet.
func parseIP(b []byte, d *Drop) error {
	if len(b) < 1 {
		return errors.New("empty packet")
	}
	var (
		proto uint8
		l4    []byte
		first bool
	)
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return fmt.Errorf("IPv4 header of %d bytes", len(b))
		}
		ihl := int(b[0]&0x0f) * 4
		if ihl < 20 || ihl > len(b) {
			return fmt.Errorf("IPv4 header length %d of a %d-byte packet", ihl, len(b))
		}
		proto = b[9]
		d.Src = netip.AddrFrom4([4]byte(b[12:16])).String()
		d.Dst = netip.AddrFrom4([4]byte(b[16:20])).String()
		first = binary.BigEndian.Uint16(b[6:8])&0x1fff == 0
		l4 = b[ihl:]
	case 6:
		if len(b) < 40 {
			return fmt.Errorf("IPv6 header of %d bytes", len(b))
		}
		d.Src = netip.AddrFrom16([16]byte(b[8:24])).String()
		d.Dst = netip.AddrFrom16([16]byte(b[24:40])).String()
		proto, l4, first = walkIPv6(b[6], b[40:])
	default:
		return fmt.Errorf("IP version %d", b[0]>>4)
	}
	d.Protocol = protocolName(proto)
	if first && (proto == protoTCP || proto == protoUDP || proto == protoSCTP) && len(l4) >= 4 {
		d.SrcPort = binary.BigEndian.Uint16(l4[0:2])
		d.DstPort = binary.BigEndian.Uint16(l4[2:4])
	}
	return nil
}

// walkIPv6 skips IPv6 extension headers from next: the transport protocol,
// its header and whether this is a first (or only) fragment. A header cut
// short leaves the transport unknown (an empty l4).
func walkIPv6(next uint8, b []byte) (uint8, []byte, bool) {
	first := true
	for range maxExtHeaders {
		switch next {
		case 0, 43, 60: // hop-by-hop, routing, destination options
			if len(b) < 8 {
				return next, nil, first
			}
			n := (int(b[1]) + 1) * 8
			if n > len(b) {
				return b[0], nil, first
			}
			next, b = b[0], b[n:]
		case 44: // fragment
			if len(b) < 8 {
				return next, nil, first
			}
			first = binary.BigEndian.Uint16(b[2:4])&0xfff8 == 0
			next, b = b[0], b[8:]
		default:
			return next, b, first
		}
	}
	return next, nil, first
}

func protocolName(p uint8) string {
	switch p {
	case protoTCP:
		return "tcp"
	case protoUDP:
		return "udp"
	case protoSCTP:
		return "sctp"
	case protoICMP:
		return "icmp"
	case protoICMPv6:
		return "icmpv6"
	}
	return fmt.Sprintf("proto-%d", p)
}
