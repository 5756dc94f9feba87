package v1

import "net/netip"

// InstanceName is the name of the IPInstance that records a: the address in
// canonical form, with an IPv6 address's colons written as dashes so that it
// is a valid object name. A name that would start or end with a dash (an
// IPv6 address starting or ending with "::") gets a "0" there, which no
// canonical address has, so the mapping stays one to one. The CRD's rules
// require every IPInstance to carry this name.
func InstanceName(a netip.Addr) string {
	b := []byte(a.String())
	for i, c := range b {
		if c == ':' {
			b[i] = '-'
		}
	}
	s := string(b)
	if s[0] == '-' {
		s = "0" + s
	}
	if s[len(s)-1] == '-' {
		s += "0"
	}
	return s
}
