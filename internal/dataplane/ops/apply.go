package ops

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/pkg/family"
)

// Apply carries out p in the order of p.Steps. Writes are idempotent:
// adding what already exists and deleting what is already gone succeed. A
// failed operation does not stop the others (the next reconcile retries
// it); all failures are returned together, each naming what failed.
func (h *Handle) Apply(p desired.Plan) error {
	l := h.c.resolver()
	var errs []error
	for _, st := range p.Steps() {
		if err := h.apply(l, st); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// apply carries out one step through the family of its object.
func (h *Handle) apply(l *linkIndexes, st desired.Step) error {
	switch o := st.Object.(type) {
	case desired.Addr:
		return pick(st.Del, h.Addrs().del, h.Addrs().add)(l, o)
	case desired.Route:
		return pick(st.Del, h.Routes().del, h.Routes().add)(l, o)
	case desired.Neigh:
		return pick(st.Del, h.Neighs().del, h.Neighs().add)(l, o)
	case desired.FDB:
		return pick(st.Del, h.Neighs().delFDB, h.Neighs().addFDB)(l, o)
	case desired.Rule:
		return pick(st.Del, h.Rules().del, h.Rules().add)(o)
	}
	return fmt.Errorf("apply: unknown object %T", st.Object)
}

// pick returns del for a delete step and add otherwise.
func pick[F any](isDel bool, del, add F) F {
	if isDel {
		return del
	}
	return add
}

// linkIndexes resolves device names to indexes for one Apply: it asks the
// kernel for each distinct name the plan uses, once, instead of listing every
// link of the namespace. A name that is not a link's name (an alternative
// name is not) is remembered as missing for the rest of the call.
type linkIndexes struct {
	c     *conn
	known map[string]int
}

func (c *conn) resolver() *linkIndexes {
	return &linkIndexes{c: c, known: make(map[string]int)}
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
		link, err := l.c.nl.LinkByName(dev)
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

func afOf(a netip.Addr) int {
	return afOfFamily(family.Of(a))
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
