package policydrops

import (
	"encoding/binary"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// ipv4 builds an IPv4 packet of proto from src to dst with the given
// transport header bytes and fragment offset.
func ipv4(proto uint8, src, dst string, frag uint16, l4 []byte) []byte {
	b := make([]byte, 20, 20+len(l4))
	b[0] = 0x45
	binary.BigEndian.PutUint16(b[2:], uint16(20+len(l4)))
	binary.BigEndian.PutUint16(b[6:], frag)
	b[8], b[9] = 64, proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(b[12:], s[:])
	copy(b[16:], d[:])
	return append(b, l4...)
}

// ipv6 builds an IPv6 packet whose first header after the fixed one is
// next, followed by rest.
func ipv6(next uint8, src, dst string, rest []byte) []byte {
	b := make([]byte, 40, 40+len(rest))
	b[0] = 0x60
	binary.BigEndian.PutUint16(b[4:], uint16(len(rest)))
	b[6], b[7] = next, 64
	s, d := netip.MustParseAddr(src).As16(), netip.MustParseAddr(dst).As16()
	copy(b[8:], s[:])
	copy(b[24:], d[:])
	return append(b, rest...)
}

func ports(src, dst uint16) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint16(b, src)
	binary.BigEndian.PutUint16(b[2:], dst)
	return b
}

func TestParseDroppedPacket(t *testing.T) {
	at := time.Unix(1700000000, 0).UTC()
	hopByHop := append([]byte{17, 0, 0, 0, 0, 0, 0, 0}, ports(5353, 53)...)
	fragNext := []byte{6, 0, 0x00, 0x08, 0, 0, 0, 1} // offset 1: not the first fragment
	for _, tc := range []struct {
		name   string
		prefix string
		pkt    []byte
		want   Drop
	}{
		{"ipv4 tcp isolation", "estuary-drop ingress est1234 -", ipv4(6, "10.0.0.1", "10.0.0.2", 0, ports(40000, 80)),
			Drop{Direction: "ingress", HostVeth: "est1234", Protocol: "tcp", Src: "10.0.0.1", Dst: "10.0.0.2", SrcPort: 40000, DstPort: 80}},
		{"ipv4 sctp deny", "estuary-drop egress est1 cnp/deny-db", ipv4(132, "10.0.0.2", "10.9.0.1", 0, ports(1, 3868)),
			Drop{Direction: "egress", HostVeth: "est1", Policy: "cnp/deny-db", Protocol: "sctp", Src: "10.0.0.2", Dst: "10.9.0.1", SrcPort: 1, DstPort: 3868}},
		{"ipv4 later fragment has no ports", "estuary-drop egress est1 -", ipv4(17, "10.0.0.2", "10.9.0.1", 10, ports(1, 53)),
			Drop{Direction: "egress", HostVeth: "est1", Protocol: "udp", Src: "10.0.0.2", Dst: "10.9.0.1"}},
		{"ipv4 icmp", "estuary-drop egress est1 -", ipv4(1, "10.0.0.2", "10.9.0.1", 0, []byte{8, 0, 0, 0}),
			Drop{Direction: "egress", HostVeth: "est1", Protocol: "icmp", Src: "10.0.0.2", Dst: "10.9.0.1"}},
		{"ipv6 udp after hop-by-hop", "estuary-drop ingress est2 #c-0011223344556677", ipv6(0, "fd00::1", "fd00::2", hopByHop),
			Drop{Direction: "ingress", HostVeth: "est2", Policy: "#c-0011223344556677", Protocol: "udp", Src: "fd00::1", Dst: "fd00::2", SrcPort: 5353, DstPort: 53}},
		{"ipv6 later fragment", "estuary-drop ingress est2 -", ipv6(44, "fd00::1", "fd00::2", append(fragNext, ports(1, 2)...)),
			Drop{Direction: "ingress", HostVeth: "est2", Protocol: "tcp", Src: "fd00::1", Dst: "fd00::2"}},
		{"ipv4 truncated before ports", "estuary-drop ingress est1 -", ipv4(6, "10.0.0.1", "10.0.0.2", 0, []byte{1, 2}),
			Drop{Direction: "ingress", HostVeth: "est1", Protocol: "tcp", Src: "10.0.0.1", Dst: "10.0.0.2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDroppedPacket(tc.prefix, tc.pkt, at)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Time = at
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseDroppedPacketRejects(t *testing.T) {
	good := ipv4(6, "10.0.0.1", "10.0.0.2", 0, ports(1, 2))
	for name, tc := range map[string]struct {
		prefix, want string
		pkt          []byte
	}{
		"foreign prefix": {"nft-trace drop", "not an estuary drop", good},
		"bad direction":  {"estuary-drop sideways est1 -", "direction", good},
		"short ipv4":     {"estuary-drop ingress est1 -", "IPv4 header of 10 bytes", good[:10]},
		"bad ihl":        {"estuary-drop ingress est1 -", "header length", append([]byte{0x4f}, good[1:20]...)},
		"short ipv6":     {"estuary-drop ingress est1 -", "IPv6 header", ipv6(6, "::1", "::2", nil)[:30]},
		"not ip":         {"estuary-drop ingress est1 -", "IP version 7", []byte{0x70}},
		"empty":          {"estuary-drop ingress est1 -", "empty packet", nil},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseDroppedPacket(tc.prefix, tc.pkt, time.Time{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
		})
	}
}

func TestLogPrefixFitsTheKernel(t *testing.T) {
	long := "cnp/" + strings.Repeat("a", 253)
	for _, tc := range []struct{ policy, want string }{
		{"", "estuary-drop ingress est0123456789ab -"},
		{"cnp/deny", "estuary-drop ingress est0123456789ab cnp/deny"},
		{long, "estuary-drop ingress est0123456789ab #c-0123456789abcdef"},
	} {
		got := LogPrefix("ingress", "est0123456789ab", tc.policy, "c-0123456789abcdef")
		if got != tc.want || len(got) > MaxPrefix {
			t.Errorf("LogPrefix(%q) = %q (%d bytes), want %q", tc.policy, got, len(got), tc.want)
		}
		_, _, pol, err := ParsePrefix(got)
		if err != nil || (pol != tc.policy && pol != "#c-0123456789abcdef") {
			t.Errorf("ParsePrefix(%q) = %q, %v", got, pol, err)
		}
	}
}

// FuzzParseDroppedPacket: any bytes either parse into a drop whose
// addresses are the packet's family, or give an error; never a panic.
func FuzzParseDroppedPacket(f *testing.F) {
	f.Add("estuary-drop ingress est1 -", ipv4(6, "10.0.0.1", "10.0.0.2", 0, ports(1, 2)))
	f.Add("estuary-drop egress est1 cnp/x", ipv6(0, "fd00::1", "fd00::2", append([]byte{17, 0, 0, 0, 0, 0, 0, 0}, ports(3, 4)...)))
	f.Add("estuary-drop egress est1 -", ipv6(44, "fd00::1", "fd00::2", []byte{6, 0, 0, 0, 0, 0, 0, 1}))
	f.Fuzz(func(t *testing.T, prefix string, pkt []byte) {
		d, err := ParseDroppedPacket(prefix, pkt, time.Time{})
		if err != nil {
			return
		}
		src, err1 := netip.ParseAddr(d.Src)
		dst, err2 := netip.ParseAddr(d.Dst)
		if err1 != nil || err2 != nil || src.Is4() != (pkt[0]>>4 == 4) || dst.Is4() != src.Is4() {
			t.Fatalf("packet %x parsed into addresses %q %q", pkt, d.Src, d.Dst)
		}
		if d.Direction != "ingress" && d.Direction != "egress" || d.Protocol == "" {
			t.Fatalf("parsed %+v", d)
		}
	})
}
