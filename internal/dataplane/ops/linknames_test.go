package ops

import (
	"encoding/binary"
	"testing"

	"golang.org/x/sys/unix"
)

// TestLinkDumpMatchesLinkList: the lean dump names the same links with the
// same indexes as the library's full LinkList.
func TestLinkDumpMatchesLinkList(t *testing.T) {
	h := newNS(t)
	got, err := h.c.links()
	if err != nil {
		t.Fatal(err)
	}
	full, err := h.c.nl.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	if len(full) < 3 || len(got.byName) != len(full) {
		t.Fatalf("lean dump has %d links, LinkList %d", len(got.byName), len(full))
	}
	for _, l := range full {
		a := l.Attrs()
		if got.byName[a.Name] != a.Index || got.byIndex[a.Index] != a.Name {
			t.Errorf("link %s (%d): lean dump has index %d, name %q", a.Name, a.Index, got.byName[a.Name], got.byIndex[a.Index])
		}
	}
}

func rtattr(typ uint16, value []byte) []byte {
	n := unix.SizeofRtAttr + len(value)
	b := make([]byte, (n+3)&^3)
	binary.NativeEndian.PutUint16(b[0:2], uint16(n))
	binary.NativeEndian.PutUint16(b[2:4], typ)
	copy(b[4:], value)
	return b
}

func TestIfName(t *testing.T) {
	msg := append(rtattr(unix.IFLA_MTU, []byte{0xdc, 0x05, 0, 0}), rtattr(unix.IFLA_IFNAME, []byte("est0123\x00"))...)
	if name, ok := ifName(msg); !ok || name != "est0123" {
		t.Errorf("ifName = %q, %v", name, ok)
	}
	for _, bad := range [][]byte{nil, {1, 0}, {2, 0, 3, 0}, {200, 0, 3, 0, 'e'}, rtattr(unix.IFLA_MTU, []byte{1, 2, 3, 4})} {
		if name, ok := ifName(bad); ok {
			t.Errorf("ifName(%v) = %q, want none", bad, name)
		}
	}
}

// FuzzIfName: any bytes give a name or none, never a panic or a read past
// the message.
func FuzzIfName(f *testing.F) {
	f.Add(rtattr(unix.IFLA_IFNAME, []byte("eth0\x00")))
	f.Add([]byte{4, 0, 3, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if name, ok := ifName(b); ok && len(name) > len(b) {
			t.Fatalf("name %q longer than the message", name)
		}
	})
}
