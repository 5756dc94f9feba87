package ops

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// EnsureVXLAN makes the named VXLAN device exist with these attributes and be
// up, and returns its MAC. Learning is off: the FDB is written by estuary. A
// link of that name that is not a VXLAN device, or whose VNI, port, parent,
// local address or learning differ, is deleted and created again (the kernel
// cannot change them in place); a different MTU is set in place. parent may
// be empty; localIP may be invalid.
func (h *Handle) EnsureVXLAN(name string, vni uint32, port int, parent string, localIP netip.Addr,
	mtu int) (net.HardwareAddr, error) {
	mac, err := h.EnsureVXLANDevice(VXLAN{Name: name, VNI: vni, Port: port, Parent: parent, LocalIP: localIP, MTU: mtu})
	if err != nil {
		return nil, err
	}
	if err := h.SetLinkUp(name); err != nil {
		return nil, fmt.Errorf("ensure vxlan %s: %w", name, err)
	}
	return mac, nil
}

// EnsureVeth makes a veth pair name <-> peer exist, with both ends up and the
// given MTU (0 keeps the kernel's default). An existing link with that name
// that is not a veth is an error; it is not replaced.
func (h *Handle) EnsureVeth(name, peer string, mtu int) error {
	link, err := h.nl.LinkByName(name)
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name, MTU: mtu}, PeerName: peer}
		if err := h.nl.LinkAdd(veth); err != nil {
			return fmt.Errorf("ensure veth %s: create: %w", name, err)
		}
		link, err = h.nl.LinkByName(name)
	}
	if err != nil {
		return fmt.Errorf("ensure veth %s: %w", name, err)
	}
	if _, ok := link.(*netlink.Veth); !ok {
		return fmt.Errorf("ensure veth %s: link exists with type %s", name, link.Type())
	}
	if err := h.setMTUAndUp(link, mtu); err != nil {
		return fmt.Errorf("ensure veth %s: %w", name, err)
	}
	peerLink, err := h.nl.LinkByName(peer)
	if err != nil {
		return fmt.Errorf("ensure veth %s: peer %s: %w", name, peer, err)
	}
	if err := h.setMTUAndUp(peerLink, mtu); err != nil {
		return fmt.Errorf("ensure veth %s: peer %s: %w", name, peer, err)
	}
	return nil
}

// EnsureBridge makes the named bridge exist and be up.
func (h *Handle) EnsureBridge(name string) error {
	_, err := h.nl.LinkByName(name)
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		err = h.nl.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}})
	}
	if err != nil {
		return fmt.Errorf("ensure bridge %s: %w", name, err)
	}
	link, err := h.nl.LinkByName(name)
	if err == nil {
		err = h.setMTUAndUp(link, 0)
	}
	if err != nil {
		return fmt.Errorf("ensure bridge %s: %w", name, err)
	}
	return nil
}

// DeleteLink deletes the named link; a link that does not exist is success.
func (h *Handle) DeleteLink(name string) error {
	link, err := h.nl.LinkByName(name)
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete link %s: %w", name, err)
	}
	return h.deleteLink(link)
}

// deleteLink deletes a link found earlier. The link may be gone by then: a
// veth goes with its peer's namespace, which the kernel tears down
// asynchronously after the runtime removed it, so ENODEV is success.
func (h *Handle) deleteLink(link netlink.Link) error {
	if err := h.nl.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete link %s: %w", link.Attrs().Name, err)
	}
	return nil
}

// LinkIndex returns the index of the named link.
func (h *Handle) LinkIndex(name string) (int, error) {
	link, err := h.nl.LinkByName(name)
	if err != nil {
		return 0, fmt.Errorf("link %s: %w", name, err)
	}
	return link.Attrs().Index, nil
}

func (h *Handle) setMTUAndUp(link netlink.Link, mtu int) error {
	if mtu > 0 && link.Attrs().MTU != mtu {
		if err := h.nl.LinkSetMTU(link, mtu); err != nil {
			return fmt.Errorf("set mtu %d: %w", mtu, err)
		}
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := h.nl.LinkSetUp(link); err != nil {
			return fmt.Errorf("set up: %w", err)
		}
	}
	return nil
}
