package ops

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
)

// arpWellFormed says, from the frame's bytes alone, whether parseARP must
// accept it: long enough, ethertype ARP, hardware type Ethernet, protocol
// IPv4, address lengths 6 and 4, and a unicast sender hardware address.
func arpWellFormed(f []byte) bool {
	if len(f) < 42 || f[12] != 0x08 || f[13] != 0x06 {
		return false
	}
	a := f[14:]
	sha := a[8:14]
	return a[0] == 0 && a[1] == 1 && a[2] == 0x08 && a[3] == 0 && a[4] == 6 && a[5] == 4 &&
		sha[0]&1 == 0 && !bytes.Equal(sha, make([]byte, 6))
}

func unhexARP(t testing.TB, s string) []byte {
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// arpSeeds are frames as stations on a pod's segment send them, and the
// malformed and hostile ones a pod can send as well.
const (
	// A kernel's request for 10.9.0.2 from 10.9.0.1, padded to 60 bytes.
	arpKernelRequest = "ffffffffffff 02000000000a 0806 0001 0800 06 04 0001 02000000000a 0a090001 000000000000 0a090002" +
		" 000000000000000000000000000000000000"
	// Its reply, unpadded as a veth delivers it.
	arpKernelReply = "02000000000a 02000000000b 0806 0001 0800 06 04 0002 02000000000b 0a090002 02000000000a 0a090001"
	// An RFC 5227 probe: sender 0.0.0.0.
	arpProbe = "ffffffffffff 02000000000b 0806 0001 0800 06 04 0001 02000000000b 00000000 000000000000 0a090002"
)

// FuzzParseARP: parseARP, which reads the ARP frames any station of an
// underlay segment (a pod among them) sends, never panics, accepts exactly
// the well-formed IPv4-over-Ethernet frames with a unicast sender, reads
// their fields as the bytes say, keeps no reference to the frame, and reads
// back what arpFrame makes of its result.
func FuzzParseARP(f *testing.F) {
	for _, s := range []string{arpKernelRequest, arpKernelReply, arpProbe} {
		f.Add(unhexARP(f, s))
	}
	reply := unhexARP(f, arpKernelReply)
	for _, mutate := range []func(b []byte){
		func(b []byte) { b[14], b[15] = 0, 6 },                  // hardware type IEEE 802
		func(b []byte) { b[16], b[17] = 0x86, 0xdd },            // protocol IPv6
		func(b []byte) { b[18], b[19] = 16, 16 },                // lengths of another protocol
		func(b []byte) { copy(b[22:28], ethernet.Broadcast) },   // broadcast sender
		func(b []byte) { copy(b[22:28], make([]byte, 6)) },      // all-zero sender
		func(b []byte) { b[22] = 0x01 },                         // multicast sender
		func(b []byte) { b[12], b[13] = 0x81, 0x00 },            // a VLAN tag
		func(b []byte) { b[20], b[21] = 0xff, 0xff },            // unknown opcode
		func(b []byte) { copy(b[28:32], []byte{224, 0, 0, 1}) }, // multicast sender address
	} {
		b := bytes.Clone(reply)
		mutate(b)
		f.Add(b)
	}
	f.Add(reply[:41])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, frame []byte) {
		p, ok := parseARP(frame)
		if ok != arpWellFormed(frame) {
			t.Fatalf("parseARP(%x) accepted = %v, want %v", frame, ok, !ok)
		}
		if !ok {
			if !reflect.DeepEqual(p, arpPacket{}) {
				t.Fatalf("refused frame %x gave %+v", frame, p)
			}
			return
		}
		a := frame[etherLen:]
		want := arpPacket{op: arp.Operation(binary.BigEndian.Uint16(a[6:8])), senderMAC: net.HardwareAddr(bytes.Clone(a[8:14])),
			sender: netip.AddrFrom4([4]byte(a[14:18])), target: netip.AddrFrom4([4]byte(a[24:28]))}
		if !reflect.DeepEqual(p, want) {
			t.Fatalf("parseARP(%x) = %+v, want %+v", frame, p, want)
		}
		for i := range frame {
			frame[i] ^= 0xff
		}
		if !reflect.DeepEqual(p, want) {
			t.Fatalf("parseARP's result changed with its frame: %+v", p)
		}
		b, err := arpFrame(p.op, p.senderMAC, p.sender, p.target)
		if err != nil {
			t.Fatalf("arpFrame(%+v): %v", p, err)
		}
		again, ok := parseARP(b)
		if !ok || !reflect.DeepEqual(again, p) {
			t.Fatalf("round trip of %+v: %+v, %v", p, again, ok)
		}
	})
}
