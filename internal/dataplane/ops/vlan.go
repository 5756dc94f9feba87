package ops

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// The underlay's sub-interfaces (owner underlay) carry desired.VLANMarker as
// their alias: it is how estuary tells its own from ones an administrator
// made.

// ErrVLANUnsupported is returned (wrapped) by VLANs.Ensure when the kernel has
// no 802.1Q support (no 8021q module): the link add fails with "operation
// not supported", which iproute2 shows as "Unknown device type".
var ErrVLANUnsupported = errors.New("kernel has no 802.1Q VLAN support")

// VLANLink is an 802.1Q link as the kernel reports it.
type VLANLink struct {
	Name   string
	Parent string // the parent link's name; "" when it is in another namespace
	ID     int
	// Marked reports whether the link carries desired.VLANMarker, i.e. estuary made it.
	Marked bool
}

// Ensure makes the 802.1Q link name (VLAN id on parent) exist. A new
// link is created down and marked with desired.VLANMarker, so that the caller can
// write its per-link settings before bringing it up (Links.SetUp). An existing
// link of that name is kept if it is a VLAN with this id on this parent,
// whoever made it (an administrator's sub-interface is used, never marked,
// and so never deleted); a marked link with other attributes is deleted and
// created again (the kernel cannot change a VLAN's id or parent in place);
// any other link of that name is an error and is left alone.
func (h *VLANs) Ensure(parent string, id int, name string) error {
	if id < 1 || id > 4094 {
		return fmt.Errorf("ensure vlan %s: id %d out of range 1-4094", name, id)
	}
	if name == "" || len(name) > unix.IFNAMSIZ-1 {
		return fmt.Errorf("ensure vlan %s: name must be 1 to %d bytes", name, unix.IFNAMSIZ-1)
	}
	p, err := h.nl.LinkByName(parent)
	if err != nil {
		return fmt.Errorf("ensure vlan %s: parent %s: %w", name, parent, err)
	}
	link, err := h.nl.LinkByName(name)
	switch {
	case errors.As(err, &netlink.LinkNotFoundError{}):
	case err != nil:
		return fmt.Errorf("ensure vlan %s: %w", name, err)
	default:
		v, isVLAN := link.(*netlink.Vlan)
		if isVLAN && v.VlanId == id && v.ParentIndex == p.Attrs().Index {
			return nil
		}
		if link.Attrs().Alias != desired.VLANMarker {
			return fmt.Errorf("ensure vlan %s: a %s link of that name exists and is not estuary's", name, link.Type())
		}
		if err := h.nl.LinkDel(link); err != nil {
			return fmt.Errorf("ensure vlan %s: delete stale link: %w", name, err)
		}
	}
	v := &netlink.Vlan{
		LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: p.Attrs().Index, Alias: desired.VLANMarker},
		VlanId:    id,
	}
	if err := h.nl.LinkAdd(v); err != nil {
		if VLANUnsupported(err) {
			return fmt.Errorf("ensure vlan %s (id %d on %s): %w: %w", name, id, parent, ErrVLANUnsupported, err)
		}
		return fmt.Errorf("ensure vlan %s (id %d on %s): %w", name, id, parent, err)
	}
	return nil
}

// VLANUnsupported reports whether err is the kernel's answer to a VLAN link
// add without 802.1Q support: EOPNOTSUPP (no link kind "vlan" and no module
// to load), or an error already wrapping ErrVLANUnsupported.
func VLANUnsupported(err error) bool {
	return errors.Is(err, ErrVLANUnsupported) || errors.Is(err, unix.EOPNOTSUPP)
}

// List lists the namespace's 802.1Q links.
func (h *VLANs) List() ([]VLANLink, error) {
	ls, err := retryDump("links", func() ([]netlink.Link, error) { return h.nl.LinkList() })
	if err != nil {
		return nil, err
	}
	names := make(map[int]string, len(ls))
	for _, l := range ls {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	var out []VLANLink
	for _, l := range ls {
		v, ok := l.(*netlink.Vlan)
		if !ok {
			continue
		}
		a := v.Attrs()
		out = append(out, VLANLink{Name: a.Name, Parent: names[a.ParentIndex], ID: v.VlanId, Marked: a.Alias == desired.VLANMarker})
	}
	return out, nil
}

// DeleteMarked deletes the named link if it is an 802.1Q link carrying
// desired.VLANMarker; a link that does not exist is success, and any other link is
// an error and is left alone.
func (h *VLANs) DeleteMarked(name string) error {
	link, err := h.nl.LinkByName(name)
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete vlan %s: %w", name, err)
	}
	if _, ok := link.(*netlink.Vlan); !ok || link.Attrs().Alias != desired.VLANMarker {
		return fmt.Errorf("delete vlan %s: the %s link is not estuary's", name, link.Type())
	}
	if err := h.nl.LinkDel(link); err != nil {
		return fmt.Errorf("delete vlan %s: %w", name, err)
	}
	return nil
}
