// Package family owns the one IP address family type every estuary package
// shares: the allocator, the network model, the node labels and the data
// plane all speak of IPv4 and IPv6 through it, of a prefix's last address,
// and of an inclusive address range (Range). It is the one place that converts between a family, its name
// ("IPv4", "IPv6", as the ip-family annotation spells it) and its IP version
// (4, 6, as the API's version fields spell it). It is pure Go on net/netip.
package family

import "net/netip"

// Family is an IP address family, spelled as the ip-family annotation and
// the API spell it: "IPv4" or "IPv6".
type Family string

// The address families.
const (
	IPv4 Family = "IPv4"
	IPv6 Family = "IPv6"
)

// Of returns the family of a valid address. An IPv4-mapped IPv6 address is
// IPv6; callers that mean the IPv4 address Unmap it first.
func Of(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// Valid reports whether f is IPv4 or IPv6.
func (f Family) Valid() bool { return f == IPv4 || f == IPv6 }

// Version is the IP version, 4 or 6, and 0 for an invalid family.
func (f Family) Version() int {
	switch f {
	case IPv4:
		return 4
	case IPv6:
		return 6
	}
	return 0
}

// FromVersion is the family of IP version v, as the API's version fields
// spell it (4 or 6); ok is false for any other number.
func FromVersion(v int) (f Family, ok bool) {
	switch v {
	case 4:
		return IPv4, true
	case 6:
		return IPv6, true
	}
	return "", false
}

// Index is 0 for IPv4 and 1 for IPv6, for arrays indexed by family; ok is
// false for an invalid family.
func (f Family) Index() (i int, ok bool) {
	switch f {
	case IPv4:
		return 0, true
	case IPv6:
		return 1, true
	}
	return 0, false
}

// LastAddr is the highest address of p (its broadcast address for IPv4); p
// is masked first, so any host bits it carries do not matter.
func LastAddr(p netip.Prefix) netip.Addr {
	p = p.Masked()
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
