package ops

import (
	"net"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/pkg/family"
)

// Scope narrows what Read lists beyond routes, rules and neighbours, which
// it always lists in full.
type Scope struct {
	// FDBDevice selects the links whose FDB is read. Nil reads none.
	FDBDevice func(name string) bool
	// NoAddrs leaves addresses out (State.Addrs stays empty).
	NoAddrs bool
	// NoNeighs leaves neighbour entries out (State.Neighs stays empty).
	NoNeighs bool
}

// links maps link indexes to names and back.
type links struct {
	byIndex map[int]string
	byName  map[string]int
}

// Read lists the kernel's state: routes of every table and both families,
// policy rules, permanent and proxy neighbour entries (the dynamic neighbour
// cache is not state and is skipped), the tunnel FDB entries (those with a
// destination) of the links sc selects, addresses and neighbours unless sc
// leaves them out, and the names of the links that exist.
func (h *Handle) Read(sc Scope) (desired.State, error) {
	l, err := h.c.links()
	if err != nil {
		return desired.State{}, err
	}
	s := desired.State{Links: l.byName}
	steps := []func() error{
		func() (err error) { s.Routes, err = h.Routes().read(l); return },
		func() (err error) { s.Rules, err = h.Rules().read(); return },
		func() (err error) { s.FDB, err = h.Neighs().readFDB(l, sc); return },
	}
	if !sc.NoNeighs {
		steps = append(steps, func() (err error) { s.Neighs, err = h.Neighs().read(l); return })
	}
	if !sc.NoAddrs {
		steps = append(steps, func() (err error) { s.Addrs, err = h.Addrs().read(l); return })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return desired.State{}, err
		}
	}
	return s, nil
}

func fromAF(fam int) family.Family {
	if fam == unix.AF_INET6 {
		return family.IPv6
	}
	return family.IPv4
}

// afOfFamily is the kernel's address family of f; with fromAF the one
// mapping between the two.
func afOfFamily(f family.Family) int {
	if f == family.IPv6 {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

// addrOf converts a net.IP; nil gives the invalid Addr.
func addrOf(ip net.IP) netip.Addr {
	if v4 := ip.To4(); v4 != nil {
		return netip.AddrFrom4([4]byte(v4))
	}
	a, _ := netip.AddrFromSlice(ip)
	return a
}

// prefixOf converts a net.IPNet; nil is the default route of fam.
func prefixOf(n *net.IPNet, fam int) netip.Prefix {
	if n == nil {
		if fam == unix.AF_INET6 {
			return netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(addrOf(n.IP), ones)
}
