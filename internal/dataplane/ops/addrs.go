package ops

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

func kernelAddr(a desired.Addr) *netlink.Addr {
	ka := &netlink.Addr{IPNet: addrNet(a.Prefix), Scope: int(a.Scope)}
	if a.NoPrefixRoute {
		ka.Flags = unix.IFA_F_NOPREFIXROUTE
	}
	return ka
}

func (h *Addrs) add(l *linkIndexes, a desired.Addr) error {
	idx, err := l.index(a.Dev)
	if err == nil {
		err = h.nl.AddrReplace(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: idx}}, kernelAddr(a))
	}
	if err != nil {
		return fmt.Errorf("add %s: %w", a, err)
	}
	return nil
}

func (h *Addrs) del(l *linkIndexes, a desired.Addr) error {
	idx, err := l.index(a.Dev)
	if gone(err) {
		return nil // the device is gone, and its addresses with it
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", a, err)
	}
	link := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: idx}}
	if err := h.nl.AddrDel(link, kernelAddr(a)); err != nil && !ignore(err, unix.EADDRNOTAVAIL, unix.ENOENT) {
		return fmt.Errorf("delete %s: %w", a, err)
	}
	return nil
}

func (h *Addrs) read(l links) ([]desired.Addr, error) {
	as, err := retryDump("addresses", func() ([]netlink.Addr, error) { return h.nl.AddrList(nil, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, err
	}
	out := make([]desired.Addr, 0, len(as))
	for _, a := range as {
		if a.IPNet == nil {
			continue
		}
		ones, _ := a.Mask.Size()
		out = append(out, desired.Addr{
			Dev:           l.byIndex[a.LinkIndex],
			Prefix:        netip.PrefixFrom(addrOf(a.IP), ones),
			Scope:         desired.Scope(a.Scope),
			NoPrefixRoute: a.Flags&unix.IFA_F_NOPREFIXROUTE != 0,
		})
	}
	return out, nil
}

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

// ByLink lists every link in index order with its global unicast
// addresses. It lists the links and each family's addresses once.
func (h *Addrs) ByLink() ([]LinkAddrs, error) {
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

// OfLink returns the named link with its global unicast addresses.
func (h *Addrs) OfLink(name string) (LinkAddrs, error) {
	link, err := h.nl.LinkByName(name)
	if err != nil {
		return LinkAddrs{}, fmt.Errorf("link %s: %w", name, err)
	}
	return h.ofLink(link)
}

func (h *Addrs) ofLink(link netlink.Link) (LinkAddrs, error) {
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
