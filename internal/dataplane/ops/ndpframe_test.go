package ops

import (
	"bytes"
	"context"
	"encoding/hex"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/bpf"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// Frames the kernel sent on a veth between 02:00:00:00:00:0a and
// 02:00:00:00:00:0b, b holding fd00:9::2 and a adding it too: a's
// duplicate address probe (with a nonce option, RFC 7527) and b's answer.
const (
	kernelNS = "3333ff000002 02000000000a 86dd 6000000000203aff" +
		"00000000000000000000000000000000 ff0200000000000000000001ff000002" +
		"87003114 00000000 fd000009000000000000000000000002 0e01851fe3e0d57c"
	kernelNA = "333300000001 02000000000b 86dd 6000000000203aff" +
		"fd000009000000000000000000000002 ff020000000000000000000000000001" +
		"88005a7d 20000000 fd000009000000000000000000000002 020102000000000b"
)

var (
	macA = net.HardwareAddr{2, 0, 0, 0, 0, 0x0a}
	macB = net.HardwareAddr{2, 0, 0, 0, 0, 0x0b}
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestNDPMarshal: the frames built match the kernel's byte for byte, or,
// without the nonce, a checksum computed apart.
func TestNDPMarshal(t *testing.T) {
	ip1, ip2 := netip.MustParseAddr("fd00:9::1"), netip.MustParseAddr("fd00:9::2")
	for _, c := range []struct {
		name string
		p    ndpPacket
		want string
	}{
		{"unsolicited advertisement", unsolicitedNA(macB, ip2), kernelNA},
		{"probe", solicitation(macA, netip.IPv6Unspecified(), ip2), "3333ff000002 02000000000a 86dd 6000000000183aff" +
			"00000000000000000000000000000000 ff0200000000000000000001ff000002" +
			"87007d9a 00000000 fd000009000000000000000000000002"},
		{"solicitation", solicitation(macA, ip1, ip2), "3333ff000002 02000000000a 86dd 6000000000203aff" +
			"fd000009000000000000000000000001 ff0200000000000000000001ff000002" +
			"87007d7c 00000000 fd000009000000000000000000000002 010102000000000a"},
	} {
		got, err := c.p.marshal()
		if want := unhex(t, c.want); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %x, %v\nwant %x", c.name, got, err, want)
		}
	}
}

func TestParseNDP(t *testing.T) {
	ns, ok := parseNDP(unhex(t, kernelNS))
	want := ndpPacket{
		typ: icmpNS, etherDst: net.HardwareAddr{0x33, 0x33, 0xff, 0, 0, 2}, etherSrc: macA,
		src: netip.IPv6Unspecified(), dst: netip.MustParseAddr("ff02::1:ff00:2"), target: netip.MustParseAddr("fd00:9::2"),
	}
	if !ok || !reflect.DeepEqual(ns, want) {
		t.Errorf("kernel's probe = %+v, %v; want %+v", ns, ok, want)
	}
	na, ok := parseNDP(append(unhex(t, kernelNA), make([]byte, 20)...)) // trailing padding
	if !ok || na.typ != icmpNA || na.flags != naOverride || na.lladdr.String() != macB.String() || na.src != na.target {
		t.Errorf("kernel's advertisement = %+v, %v", na, ok)
	}
	base := unhex(t, kernelNA)
	for name, spoil := range map[string]func([]byte) []byte{
		"short":            func(f []byte) []byte { return f[:etherLen+ipv6.HeaderLen+ndpLen-1] },
		"arp":              func(f []byte) []byte { f[13] = 0x06; return f },
		"hop limit":        func(f []byte) []byte { f[etherLen+7] = 64; return f },
		"next header":      func(f []byte) []byte { f[etherLen+6] = 17; return f },
		"code":             func(f []byte) []byte { f[etherLen+ipv6.HeaderLen+1] = 1; return f },
		"type":             func(f []byte) []byte { f[etherLen+ipv6.HeaderLen] = 134; return f },
		"checksum":         func(f []byte) []byte { f[len(f)-1] ^= 1; return f },
		"payload too long": func(f []byte) []byte { f[etherLen+5] += 8; return f },
		"option length 0":  func(f []byte) []byte { return withOption(f, 0x0e, 0) },
		"option past end":  func(f []byte) []byte { return withOption(f, 0x0e, 2) },
	} {
		if p, ok := parseNDP(spoil(bytes.Clone(base))); ok {
			t.Errorf("%s: parsed %+v", name, p)
		}
	}
}

// withOption appends an 8-byte option of type typ claiming length units to
// the frame's message, with a correct payload length and checksum.
func withOption(f []byte, typ, units byte) []byte {
	f = append(f, typ, units, 0, 0, 0, 0, 0, 0)
	f[etherLen+5] += 8
	return withChecksum(f)
}

// withChecksum returns a copy of f with the ICMPv6 checksum set, or f when
// its payload length does not fit.
func withChecksum(f []byte) []byte {
	if len(f) < etherLen+ipv6.HeaderLen+4 {
		return f
	}
	f = bytes.Clone(f)
	ip := f[etherLen:]
	n := int(ip[4])<<8 | int(ip[5])
	if n < 4 || n > len(ip)-ipv6.HeaderLen {
		return f
	}
	m := ip[ipv6.HeaderLen : ipv6.HeaderLen+n]
	msg := icmp.Message{Type: ipv6.ICMPType(m[0]), Code: int(m[1]), Body: &icmp.RawBody{Data: m[4:]}}
	b, err := msg.Marshal(icmp.IPv6PseudoHeader(ip[8:24], ip[24:40]))
	if err != nil {
		return f
	}
	m[2], m[3] = b[2], b[3]
	return f
}

func TestNDPFilter(t *testing.T) {
	vm, err := bpf.NewVM(ndpFilter)
	if err != nil {
		t.Fatal(err)
	}
	na := unhex(t, kernelNA)
	echo := bytes.Clone(na)
	echo[etherLen+ipv6.HeaderLen] = 128
	hop := bytes.Clone(na)
	hop[etherLen+7] = 1
	for _, c := range []struct {
		name string
		f    []byte
		keep bool
	}{
		{"solicitation", unhex(t, kernelNS), true}, {"advertisement", na, true},
		{"echo request", echo, false}, {"hop limit 1", hop, false}, {"short", na[:20], false},
	} {
		if n, err := vm.Run(c.f); err != nil || (n > 0) != c.keep {
			t.Errorf("%s: filter keeps %d bytes, %v; want kept %v", c.name, n, err, c.keep)
		}
	}
}

func TestHolderOf(t *testing.T) {
	ip, other := netip.MustParseAddr("fd00:9::2"), netip.MustParseAddr("fd00:9::3")
	un, me := netip.IPv6Unspecified(), netip.MustParseAddr("fd00:9::1")
	na := unsolicitedNA(macB, ip)
	bare := na
	bare.lladdr = nil
	for _, c := range []struct {
		name           string
		p              ndpPacket
		sender, target netip.Addr
		want           net.HardwareAddr
	}{
		{"advertisement", na, un, ip, macB},
		{"advertisement without option", bare, me, ip, macB},
		{"advertisement of another address", na, un, other, nil},
		{"holder solicits", solicitation(macB, ip, other), me, ip, macB},
		{"rival probe while probing", solicitation(macB, un, ip), un, ip, macB},
		{"rival probe while resolving", solicitation(macB, un, ip), me, ip, nil},
		{"probe for another address", solicitation(macB, un, other), un, ip, nil},
	} {
		if got := holderOf(c.p, c.sender, c.target); got.String() != c.want.String() {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestSolicitedNode(t *testing.T) {
	g := solicitedNode(netip.MustParseAddr("2001:db8::1:2345:6789"))
	if g != netip.MustParseAddr("ff02::1:ff45:6789") || multicastMAC(g).String() != "33:33:ff:45:67:89" {
		t.Errorf("solicited-node group %s at %s", g, multicastMAC(g))
	}
	if m := multicastMAC(allNodes).String(); m != "33:33:00:00:00:01" {
		t.Errorf("all nodes at %s", m)
	}
}

func TestNDPRejectsIPv4(t *testing.T) {
	ctx, v4, v6 := context.Background(), netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("fd00:9::1")
	h := &Handle{}
	for name, err := range map[string]error{
		"unsolicited na": h.Segment().UnsolicitedNA("x0", v4),
		"probe":          func() error { _, err := h.Segment().NDPProbe(ctx, "x0", v4, time.Second); return err }(),
		"resolve sender": func() error { _, err := h.Segment().NDPResolve(ctx, "x0", v4, v6, time.Second); return err }(),
		"resolve target": func() error { _, err := h.Segment().NDPResolve(ctx, "x0", v6, v4, time.Second); return err }(),
		"mapped": func() error {
			_, err := h.Segment().NDPProbe(ctx, "x0", netip.AddrFrom16(v4.As16()), time.Second)
			return err
		}(),
	} {
		if err == nil || !strings.Contains(err.Error(), "x0") || !strings.Contains(err.Error(), "not an IPv6") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// FuzzParseNDP: the parser never panics, whatever it accepts the socket
// filter keeps, and it reads back what marshal makes of it. Each input is
// also tried with its checksum set, so the fuzzer gets past it.
func FuzzParseNDP(f *testing.F) {
	ip1, ip2 := netip.MustParseAddr("fd00:9::1"), netip.MustParseAddr("fd00:9::2")
	f.Add(unhex(f, kernelNS))
	f.Add(unhex(f, kernelNA))
	for _, p := range []ndpPacket{solicitation(macA, ip1, ip2), solicitation(macA, netip.IPv6Unspecified(), ip2)} {
		b, err := p.marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add(withOption(unhex(f, kernelNA), 2, 2)) // a second target link-layer address, too long
	f.Add(withOption(unhex(f, kernelNA), 0x0e, 0))
	f.Add(unhex(f, kernelNA)[:70])
	vm, err := bpf.NewVM(ndpFilter)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, frame []byte) {
		checkParsed(t, vm, frame)
		checkParsed(t, vm, withChecksum(frame))
	})
}

func checkParsed(t *testing.T, vm *bpf.VM, frame []byte) {
	t.Helper()
	p, ok := parseNDP(frame)
	if !ok {
		return
	}
	if p.typ != icmpNS && p.typ != icmpNA || (p.lladdr != nil && len(p.lladdr) != 6) {
		t.Fatalf("parsed %+v", p)
	}
	if n, err := vm.Run(frame); err != nil || n == 0 {
		t.Fatalf("filter drops a frame the parser accepts: %d, %v", n, err)
	}
	b, err := p.marshal()
	if err != nil {
		t.Fatalf("marshal %+v: %v", p, err)
	}
	again, ok := parseNDP(b)
	if !ok || !reflect.DeepEqual(again, p) {
		t.Fatalf("round trip: %+v, %v; want %+v", again, ok, p)
	}
}
