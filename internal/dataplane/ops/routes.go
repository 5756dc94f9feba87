package ops

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/pkg/family"
)

func kernelRoute(l *linkIndexes, r desired.Route) (*netlink.Route, error) {
	idx, err := l.index(r.Dev)
	if err != nil {
		return nil, err
	}
	table := r.Table
	if table == 0 {
		table = desired.MainTable
	}
	kr := &netlink.Route{
		Table:     table,
		Dst:       ipNet(r.Dst),
		LinkIndex: idx,
		Scope:     netlink.Scope(r.Scope),
		Type:      int(r.Type),
		Protocol:  netlink.RouteProtocol(r.Protocol),
		Family:    afOf(r.Dst.Addr()),
	}
	if r.Gw.IsValid() {
		kr.Gw = net.IP(r.Gw.AsSlice())
	}
	if kr.Type == 0 {
		kr.Type = unix.RTN_UNICAST
	}
	return kr, nil
}

func (h *Routes) add(l *linkIndexes, r desired.Route) error {
	kr, err := kernelRoute(l, r)
	if err == nil {
		err = h.nl.RouteReplace(kr)
	}
	if err != nil {
		return fmt.Errorf("add route %s: %w", r, err)
	}
	return nil
}

func (h *Routes) del(l *linkIndexes, r desired.Route) error {
	kr, err := kernelRoute(l, r)
	if gone(err) {
		return nil // the device is gone, and its routes with it
	}
	if err != nil {
		return fmt.Errorf("delete route %s: %w", r, err)
	}
	if err := h.nl.RouteDel(kr); err != nil && !ignore(err, unix.ESRCH, unix.ENOENT) {
		return fmt.Errorf("delete route %s: %w", r, err)
	}
	return nil
}

// AddOnlink writes r (replacing any route with its table and
// destination) with the onlink flag: the gateway is taken to be directly on
// r.Dev even though no route or address says so. Pods use it for their
// default route via a link-local next hop that exists nowhere.
func (h *Routes) AddOnlink(r desired.Route) error {
	kr, err := kernelRoute(h.resolver(), r)
	if err == nil {
		kr.Flags |= int(netlink.FLAG_ONLINK)
		err = h.nl.RouteReplace(kr)
	}
	if err != nil {
		return fmt.Errorf("add onlink route %s: %w", r, err)
	}
	return nil
}

// DefaultLink returns the name of the link of the main table's default
// route of family fam; "" when there is none. A multipath default route
// gives the link of its first next hop.
func (h *Routes) DefaultLink(fam family.Family) (string, error) {
	kfam := afOfFamily(fam)
	rs, err := retryDump("default routes", func() ([]netlink.Route, error) {
		return h.table(kfam, unix.RT_TABLE_MAIN)
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

// table lists the routes of one table and family, on the filtered
// handle so that the kernel dumps that table alone. A table that does not
// exist has no routes.
func (h *Routes) table(fam, table int) ([]netlink.Route, error) {
	rs, err := h.filtered().RouteListFiltered(fam, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	if errors.Is(err, unix.ENOENT) {
		return nil, nil
	}
	return rs, err
}

func (h *Routes) read(l links) ([]desired.Route, error) {
	var out []desired.Route
	if err := h.each(func(fam int, r netlink.Route) { out = append(out, routeFromKernel(r, fam, l)) }); err != nil {
		return nil, err
	}
	return out, nil
}

// each lists the routes of every table, IPv4's then IPv6's, and calls fn
// with each and its family (AF_INET or AF_INET6).
func (h *Routes) each(fn func(fam int, r netlink.Route)) error {
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := retryDump("routes", func() ([]netlink.Route, error) {
			return h.nl.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		})
		if err != nil {
			return err
		}
		for _, r := range rs {
			fn(fam, r)
		}
	}
	return nil
}

func routeFromKernel(r netlink.Route, fam int, l links) desired.Route {
	out := desired.Route{
		Table:    r.Table,
		Dst:      prefixOf(r.Dst, fam),
		Gw:       addrOf(r.Gw),
		Scope:    desired.Scope(r.Scope),
		Type:     desired.RouteType(r.Type),
		Protocol: uint8(r.Protocol),
	}
	if len(r.MultiPath) == 0 {
		out.Dev = l.byIndex[r.LinkIndex]
	}
	if out.Type == desired.RouteThrow {
		out.Dev = "" // the kernel reports IPv6 throw routes on lo
	}
	return out
}
