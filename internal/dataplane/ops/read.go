package ops

import (
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/state"
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

func (h *Handle) links() (links, error) {
	return retryDump("links", func() (links, error) { return h.dumper.dump(h.ns) })
}

// Read lists the kernel's state: routes of every table and both families,
// policy rules, permanent and proxy neighbour entries (the dynamic neighbour
// cache is not state and is skipped), the tunnel FDB entries (those with a
// destination) of the links sc selects, addresses and neighbours unless sc
// leaves them out, and the names of the links that exist.
func (h *Handle) Read(sc Scope) (state.State, error) {
	l, err := h.links()
	if err != nil {
		return state.State{}, err
	}
	s := state.State{Links: l.byName}
	steps := []func() error{
		func() (err error) { s.Routes, err = h.readRoutes(l); return },
		func() (err error) { s.Rules, err = h.readRules(); return },
		func() (err error) { s.FDB, err = h.readFDB(l, sc); return },
	}
	if !sc.NoNeighs {
		steps = append(steps, func() (err error) { s.Neighs, err = h.readNeighs(l); return })
	}
	if !sc.NoAddrs {
		steps = append(steps, func() (err error) { s.Addrs, err = h.readAddrs(l); return })
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return state.State{}, err
		}
	}
	return s, nil
}

func (h *Handle) readRoutes(l links) ([]state.Route, error) {
	var out []state.Route
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := retryDump("routes", func() ([]netlink.Route, error) {
			return h.nl.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		})
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			out = append(out, routeFromKernel(r, fam, l))
		}
	}
	return out, nil
}

func routeFromKernel(r netlink.Route, fam int, l links) state.Route {
	out := state.Route{
		Table:    r.Table,
		Dst:      prefixOf(r.Dst, fam),
		Gw:       addrOf(r.Gw),
		Scope:    state.Scope(r.Scope),
		Type:     state.RouteType(r.Type),
		Protocol: uint8(r.Protocol),
	}
	if len(r.MultiPath) == 0 {
		out.Dev = l.byIndex[r.LinkIndex]
	}
	if out.Type == state.RouteThrow {
		out.Dev = "" // the kernel reports IPv6 throw routes on lo
	}
	return out
}

func (h *Handle) readRules() ([]state.Rule, error) {
	var out []state.Rule
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := retryDump("rules", func() ([]netlink.Rule, error) { return h.nl.RuleList(fam) })
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			rule := state.Rule{Priority: max(r.Priority, 0), Table: r.Table, Mark: r.Mark, Family: fromAF(fam)}
			if r.Mask != nil {
				rule.Mask = *r.Mask
			}
			if r.Src != nil {
				rule.Src = prefixOf(r.Src, fam)
			}
			out = append(out, rule)
		}
	}
	return out, nil
}

func (h *Handle) readNeighs(l links) ([]state.Neigh, error) {
	var out []state.Neigh
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		ns, err := retryDump("neighbours", func() ([]netlink.Neigh, error) { return h.nl.NeighList(0, fam) })
		if err != nil {
			return nil, err
		}
		for _, n := range ns {
			if n.State&netlink.NUD_PERMANENT == 0 {
				continue
			}
			mac, _ := state.MACFrom(n.HardwareAddr)
			out = append(out, state.Neigh{Dev: l.byIndex[n.LinkIndex], IP: addrOf(n.IP), MAC: mac, Permanent: true})
		}
		ps, err := retryDump("proxy neighbours", func() ([]netlink.Neigh, error) { return h.nl.NeighProxyList(0, fam) })
		if err != nil {
			return nil, err
		}
		for _, n := range ps {
			out = append(out, state.Neigh{Dev: l.byIndex[n.LinkIndex], IP: addrOf(n.IP), Proxy: true})
		}
	}
	return out, nil
}

func (h *Handle) readFDB(l links, sc Scope) ([]state.FDB, error) {
	if sc.FDBDevice == nil {
		return nil, nil
	}
	var out []state.FDB
	for name, index := range l.byName {
		if !sc.FDBDevice(name) {
			continue
		}
		es, err := retryDump("fdb of "+name, func() ([]netlink.Neigh, error) {
			return h.nl.NeighList(index, unix.AF_BRIDGE)
		})
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			mac, macErr := state.MACFrom(e.HardwareAddr)
			if e.IP == nil || macErr != nil {
				continue // a local or multicast-list entry, not a tunnel entry
			}
			out = append(out, state.FDB{Dev: name, MAC: mac, Dst: addrOf(e.IP)})
		}
	}
	return out, nil
}

func (h *Handle) readAddrs(l links) ([]state.Addr, error) {
	as, err := retryDump("addresses", func() ([]netlink.Addr, error) { return h.nl.AddrList(nil, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, err
	}
	out := make([]state.Addr, 0, len(as))
	for _, a := range as {
		if a.IPNet == nil {
			continue
		}
		ones, _ := a.Mask.Size()
		out = append(out, state.Addr{
			Dev:           l.byIndex[a.LinkIndex],
			Prefix:        netip.PrefixFrom(addrOf(a.IP), ones),
			Scope:         state.Scope(a.Scope),
			NoPrefixRoute: a.Flags&unix.IFA_F_NOPREFIXROUTE != 0,
		})
	}
	return out, nil
}

func fromAF(fam int) family.Family {
	if fam == unix.AF_INET6 {
		return family.IPv6
	}
	return family.IPv4
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
