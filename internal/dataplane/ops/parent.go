package ops

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// LinkAddrs is a link with its MTU and its global unicast addresses of
// universe scope. Addresses of narrower scope are left out: the underlay's
// "enhanced address" is a pod's address written with scope link onto the
// node's NIC, and must never be taken for the node's own (as a tunnel
// endpoint, for one).
type LinkAddrs struct {
	Name  string
	Index int
	MTU   int
	// Addrs holds the link's global unicast addresses, IPv4 first, each
	// family in the kernel's order.
	Addrs []netip.Addr
	// Prefixes are Addrs with their prefix lengths, in the same order.
	Prefixes []netip.Prefix
}

// LinksWithAddrs lists every link in index order with its global unicast
// addresses. It lists the links and each family's addresses once.
func (h *Handle) LinksWithAddrs() ([]LinkAddrs, error) {
	ls, err := retryDump("links", func() ([]netlink.Link, error) { return h.nl.LinkList() })
	if err != nil {
		return nil, err
	}
	byIndex := make(map[int]*LinkAddrs, len(ls))
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		as, err := retryDump("addresses", func() ([]netlink.Addr, error) { return h.nl.AddrList(nil, fam) })
		if err != nil {
			return nil, err
		}
		for _, ad := range as {
			if _, ok := byIndex[ad.LinkIndex]; !ok {
				byIndex[ad.LinkIndex] = &LinkAddrs{}
			}
			byIndex[ad.LinkIndex].add(ad)
		}
	}
	out := make([]LinkAddrs, 0, len(ls))
	for _, link := range ls {
		a := link.Attrs()
		la := LinkAddrs{Name: a.Name, Index: a.Index, MTU: a.MTU}
		if got := byIndex[a.Index]; got != nil {
			la.Addrs, la.Prefixes = got.Addrs, got.Prefixes
		}
		out = append(out, la)
	}
	slices.SortFunc(out, func(a, b LinkAddrs) int { return a.Index - b.Index })
	return out, nil
}

// LinkWithAddrs returns the named link with its global unicast addresses.
func (h *Handle) LinkWithAddrs(name string) (LinkAddrs, error) {
	link, err := h.nl.LinkByName(name)
	if err != nil {
		return LinkAddrs{}, fmt.Errorf("link %s: %w", name, err)
	}
	return h.linkAddrs(link)
}

func (h *Handle) linkAddrs(link netlink.Link) (LinkAddrs, error) {
	a := link.Attrs()
	la := LinkAddrs{Name: a.Name, Index: a.Index, MTU: a.MTU}
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		as, err := retryDump("addresses of "+a.Name, func() ([]netlink.Addr, error) { return h.nl.AddrList(link, fam) })
		if err != nil {
			return LinkAddrs{}, err
		}
		for _, ad := range as {
			la.add(ad)
		}
	}
	return la, nil
}

// add appends ad when it is one of the node's own addresses.
func (la *LinkAddrs) add(ad netlink.Addr) {
	ip, ok := nodeAddr(ad)
	if !ok {
		return
	}
	bits := ip.BitLen()
	if ad.IPNet != nil {
		bits, _ = ad.Mask.Size()
	}
	la.Addrs = append(la.Addrs, ip)
	la.Prefixes = append(la.Prefixes, netip.PrefixFrom(ip, bits))
}

// nodeAddr returns ad's address if it is one of the node's own: global
// unicast and of universe scope.
func nodeAddr(ad netlink.Addr) (netip.Addr, bool) {
	ip := addrOf(ad.IP)
	return ip, ip.IsGlobalUnicast() && ad.Scope == unix.RT_SCOPE_UNIVERSE
}

// tableRoutes lists the routes of one table and family, on the filtered
// handle so that the kernel dumps that table alone. A table that does not
// exist has no routes.
func (h *Handle) tableRoutes(fam, table int) ([]netlink.Route, error) {
	rs, err := h.filtered().RouteListFiltered(fam, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	return rs, err
}

// DefaultRouteLink returns the name of the link of the main table's default
// route of family fam; "" when there is none. A multipath default route
// gives the link of its first next hop.
func (h *Handle) DefaultRouteLink(fam family.Family) (string, error) {
	kfam := unix.AF_INET
	if fam == family.IPv6 {
		kfam = unix.AF_INET6
	}
	rs, err := retryDump("default routes", func() ([]netlink.Route, error) {
		return h.tableRoutes(kfam, unix.RT_TABLE_MAIN)
	})
	if err != nil {
		return "", err
	}
	for _, r := range rs {
		if prefixOf(r.Dst, kfam).Bits() != 0 || (r.Type != 0 && r.Type != unix.RTN_UNICAST) {
			continue
		}
		idx := r.LinkIndex
		if idx == 0 && len(r.MultiPath) > 0 {
			idx = r.MultiPath[0].LinkIndex
		}
		if idx == 0 {
			continue
		}
		link, err := h.nl.LinkByIndex(idx)
		if err != nil {
			return "", fmt.Errorf("link %d of the default route: %w", idx, err)
		}
		return link.Attrs().Name, nil
	}
	return "", nil
}
