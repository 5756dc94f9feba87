package ops

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/state"
	"github.com/estuary-cni/estuary/pkg/family"
)

// Apply carries out p in the order of p.Steps. Writes are idempotent:
// adding what already exists and deleting what is already gone succeed. A
// failed operation does not stop the others (the next reconcile retries
// it); all failures are returned together, each naming what failed.
func (h *Handle) Apply(p state.Plan) error {
	l := h.resolver()
	var errs []error
	for _, st := range p.Steps() {
		if err := h.apply(l, st); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// apply carries out one step.
func (h *Handle) apply(l *linkIndexes, st state.Step) error {
	switch o := st.Object.(type) {
	case state.Addr:
		if st.Del {
			return h.delAddr(l, o)
		}
		return h.addAddr(l, o)
	case state.Route:
		if st.Del {
			return h.delRoute(l, o)
		}
		return h.addRoute(l, o)
	case state.Neigh:
		if st.Del {
			return h.delNeigh(l, o)
		}
		return h.addNeigh(l, o)
	case state.FDB:
		if st.Del {
			return h.delFDB(l, o)
		}
		return h.addFDB(l, o)
	case state.Rule:
		if st.Del {
			return h.delRule(o)
		}
		return h.addRule(o)
	}
	return fmt.Errorf("apply: unknown object %T", st.Object)
}

// linkIndexes resolves device names to indexes for one Apply: it asks the
// kernel for each distinct name the plan uses, once, instead of listing every
// link of the namespace. A name that is not a link's name (an alternative
// name is not) is remembered as missing for the rest of the call.
type linkIndexes struct {
	h     *Handle
	known map[string]int
}

func (h *Handle) resolver() *linkIndexes {
	return &linkIndexes{h: h, known: make(map[string]int)}
}

// errNoLink marks a device that does not exist: writes on it fail, deletes
// on it succeed (the kernel removed its objects with it).
var errNoLink = errors.New("not found")

func (l *linkIndexes) index(dev string) (int, error) {
	if dev == "" {
		return 0, nil
	}
	i, ok := l.known[dev]
	if !ok {
		link, err := l.h.nl.LinkByName(dev)
		switch {
		case errors.As(err, &netlink.LinkNotFoundError{}), err == nil && link.Attrs().Name != dev:
			i = -1 // the kernel also finds a link by an alternative name; only its name counts
		case err != nil:
			return 0, fmt.Errorf("link %s: %w", dev, err)
		default:
			i = link.Attrs().Index
		}
		l.known[dev] = i
	}
	if i < 0 {
		return 0, fmt.Errorf("link %s %w", dev, errNoLink)
	}
	return i, nil
}

// gone reports whether err says the device of a delete does not exist.
func gone(err error) bool { return errors.Is(err, errNoLink) }

func kernelRoute(l *linkIndexes, r state.Route) (*netlink.Route, error) {
	idx, err := l.index(r.Dev)
	if err != nil {
		return nil, err
	}
	table := r.Table
	if table == 0 {
		table = state.MainTable
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

func (h *Handle) addRoute(l *linkIndexes, r state.Route) error {
	kr, err := kernelRoute(l, r)
	if err == nil {
		err = h.nl.RouteReplace(kr)
	}
	if err != nil {
		return fmt.Errorf("add route %s: %w", r, err)
	}
	return nil
}

func (h *Handle) delRoute(l *linkIndexes, r state.Route) error {
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

func kernelRule(r state.Rule) *netlink.Rule {
	r = r.Canonical()
	kr := netlink.NewRule()
	kr.Priority = r.Priority
	kr.Table = r.Table
	kr.Family = unix.AF_INET
	if r.Family == family.IPv6 {
		kr.Family = unix.AF_INET6
	}
	if r.Src.IsValid() {
		kr.Src = ipNet(r.Src)
	}
	kr.Mark = r.Mark
	if r.Mask != 0 {
		mask := r.Mask
		kr.Mask = &mask
	}
	return kr
}

func (h *Handle) addRule(r state.Rule) error {
	if err := h.nl.RuleAdd(kernelRule(r)); err != nil && !ignore(err, unix.EEXIST) {
		return fmt.Errorf("add %s: %w", r, err)
	}
	return nil
}

func (h *Handle) delRule(r state.Rule) error {
	if err := h.nl.RuleDel(kernelRule(r)); err != nil && !ignore(err, unix.ENOENT) {
		return fmt.Errorf("delete %s: %w", r, err)
	}
	return nil
}

func kernelNeigh(l *linkIndexes, n state.Neigh) (*netlink.Neigh, error) {
	idx, err := l.index(n.Dev)
	if err != nil {
		return nil, err
	}
	kn := &netlink.Neigh{LinkIndex: idx, Family: afOf(n.IP), IP: net.IP(n.IP.AsSlice())}
	if n.Proxy {
		kn.Flags = netlink.NTF_PROXY
		return kn, nil
	}
	kn.HardwareAddr = n.MAC.HardwareAddr()
	kn.State = netlink.NUD_REACHABLE
	if n.Permanent {
		kn.State = netlink.NUD_PERMANENT
	}
	return kn, nil
}

func (h *Handle) addNeigh(l *linkIndexes, n state.Neigh) error {
	kn, err := kernelNeigh(l, n)
	if err == nil {
		err = h.nl.NeighSet(kn)
	}
	if err != nil {
		return fmt.Errorf("add %s: %w", n, err)
	}
	return nil
}

func (h *Handle) delNeigh(l *linkIndexes, n state.Neigh) error {
	kn, err := kernelNeigh(l, n)
	if gone(err) {
		return nil // the device is gone, and its entries with it
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", n, err)
	}
	if err := h.nl.NeighDel(kn); err != nil && !ignore(err, unix.ENOENT) {
		return fmt.Errorf("delete %s: %w", n, err)
	}
	return nil
}

func kernelFDB(l *linkIndexes, e state.FDB) (*netlink.Neigh, error) {
	idx, err := l.index(e.Dev)
	if err != nil {
		return nil, err
	}
	return &netlink.Neigh{
		LinkIndex:    idx,
		Family:       unix.AF_BRIDGE,
		Flags:        netlink.NTF_SELF,
		State:        netlink.NUD_PERMANENT | netlink.NUD_NOARP,
		IP:           net.IP(e.Dst.AsSlice()),
		HardwareAddr: e.MAC.HardwareAddr(),
	}, nil
}

// addFDB writes one entry. The all-zero and multicast MACs hold a list of
// destinations, so their entries are appended; a unicast MAC has one
// destination, which is replaced.
func (h *Handle) addFDB(l *linkIndexes, e state.FDB) error {
	kn, err := kernelFDB(l, e)
	if err == nil {
		if e.MAC.IsZero() || e.MAC.IsMulticast() {
			err = h.nl.NeighAppend(kn)
			if ignore(err, unix.EEXIST) {
				err = nil
			}
		} else {
			err = h.nl.NeighSet(kn)
		}
	}
	if err != nil {
		return fmt.Errorf("add %s: %w", e, err)
	}
	return nil
}

func (h *Handle) delFDB(l *linkIndexes, e state.FDB) error {
	kn, err := kernelFDB(l, e)
	if gone(err) {
		return nil // the device is gone, and its entries with it
	}
	if err != nil {
		return fmt.Errorf("delete %s: %w", e, err)
	}
	if err := h.nl.NeighDel(kn); err != nil && !ignore(err, unix.ENOENT) {
		return fmt.Errorf("delete %s: %w", e, err)
	}
	return nil
}

func kernelAddr(a state.Addr) *netlink.Addr {
	ka := &netlink.Addr{IPNet: addrNet(a.Prefix), Scope: int(a.Scope)}
	if a.NoPrefixRoute {
		ka.Flags = unix.IFA_F_NOPREFIXROUTE
	}
	return ka
}

func (h *Handle) addAddr(l *linkIndexes, a state.Addr) error {
	idx, err := l.index(a.Dev)
	if err == nil {
		err = h.nl.AddrReplace(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: idx}}, kernelAddr(a))
	}
	if err != nil {
		return fmt.Errorf("add %s: %w", a, err)
	}
	return nil
}

func (h *Handle) delAddr(l *linkIndexes, a state.Addr) error {
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

func afOf(a netip.Addr) int {
	if a.Is4() {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// ipNet converts a prefix to the masked network form routes and rules use.
func ipNet(p netip.Prefix) *net.IPNet {
	p = p.Masked()
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// addrNet converts a prefix to the address-and-length form addresses use.
func addrNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
