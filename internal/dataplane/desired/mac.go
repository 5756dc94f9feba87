package desired

import (
	"bytes"
	"fmt"
	"net"
)

// MAC is an Ethernet hardware address. Unlike net.HardwareAddr it is a value
// type, so it can be compared and used in map keys.
type MAC [6]byte

// ParseMAC parses an EUI-48 address such as "02:00:00:00:00:01".
func ParseMAC(s string) (MAC, error) {
	hw, err := net.ParseMAC(s)
	if err != nil {
		return MAC{}, fmt.Errorf("parse MAC %q: %w", s, err)
	}
	m, err := MACFrom(hw)
	if err != nil {
		return MAC{}, fmt.Errorf("parse MAC %q: %w", s, err)
	}
	return m, nil
}

// MustParseMAC is ParseMAC for constants; it panics on error.
func MustParseMAC(s string) MAC {
	m, err := ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return m
}

// MACFrom converts a 6-byte hardware address.
func MACFrom(hw net.HardwareAddr) (MAC, error) {
	var m MAC
	if len(hw) != len(m) {
		return MAC{}, fmt.Errorf("hardware address %s: want %d bytes, have %d", hw, len(m), len(hw))
	}
	copy(m[:], hw)
	return m, nil
}

// HardwareAddr returns the address as a net.HardwareAddr.
func (m MAC) HardwareAddr() net.HardwareAddr { return net.HardwareAddr(m[:]) }

// IsZero reports whether m is 00:00:00:00:00:00, the VXLAN flood entry.
func (m MAC) IsZero() bool { return m == MAC{} }

// IsMulticast reports whether m has the group bit set.
func (m MAC) IsMulticast() bool { return m[0]&1 == 1 }

// Compare orders MACs bytewise.
func (m MAC) Compare(o MAC) int { return bytes.Compare(m[:], o[:]) }

func (m MAC) String() string { return m.HardwareAddr().String() }
