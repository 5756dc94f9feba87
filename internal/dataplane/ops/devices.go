package ops

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// VXLAN describes a VXLAN device. Parent may be empty, LocalIP invalid and
// MAC zero (the kernel picks a random one).
type VXLAN struct {
	Name    string
	VNI     uint32
	Port    int
	Parent  string
	LocalIP netip.Addr
	MTU     int
	MAC     desired.MAC
}

// EnsureVXLAN makes the overlay's tunnel device (named
// desired.OverlayDevicePrefix…) exist with the attributes of v and
// returns its MAC; it does not change whether the device is up, and a device
// it creates is down, so per-device settings can be written before traffic
// flows. Learning is off: the FDB is written by estuary. A link of that name
// that is not a VXLAN device, or whose VNI, port, parent, local address or
// learning differ, is deleted and created again (the kernel cannot change
// them in place); a different MTU or MAC is set in place.
func (h *Devices) EnsureVXLAN(v VXLAN) (net.HardwareAddr, error) {
	want, err := h.vxlanLink(v)
	if err != nil {
		return nil, fmt.Errorf("ensure vxlan %s: %w", v.Name, err)
	}
	link, err := h.nl.LinkByName(v.Name)
	if err == nil && !sameVXLAN(link, want) {
		if err := h.nl.LinkDel(link); err != nil {
			return nil, fmt.Errorf("ensure vxlan %s: delete mismatched device: %w", v.Name, err)
		}
		link, err = nil, netlink.LinkNotFoundError{}
	}
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		if err := h.nl.LinkAdd(want); err != nil {
			return nil, fmt.Errorf("ensure vxlan %s: create: %w", v.Name, err)
		}
		link, err = h.nl.LinkByName(v.Name)
	}
	if err != nil {
		return nil, fmt.Errorf("ensure vxlan %s: %w", v.Name, err)
	}
	if err := h.setMTUAndMAC(link, v.MTU, v.MAC); err != nil {
		return nil, fmt.Errorf("ensure vxlan %s: %w", v.Name, err)
	}
	link, err = h.nl.LinkByIndex(link.Attrs().Index)
	if err != nil {
		return nil, fmt.Errorf("ensure vxlan %s: %w", v.Name, err)
	}
	return link.Attrs().HardwareAddr, nil
}

func (h *Devices) vxlanLink(v VXLAN) (*netlink.Vxlan, error) {
	want := &netlink.Vxlan{LinkAttrs: netlink.LinkAttrs{Name: v.Name, MTU: v.MTU}, VxlanId: int(v.VNI), Port: v.Port}
	if !v.MAC.IsZero() {
		want.HardwareAddr = v.MAC.HardwareAddr()
	}
	if v.Parent != "" {
		p, err := h.nl.LinkByName(v.Parent)
		if err != nil {
			return nil, fmt.Errorf("parent %s: %w", v.Parent, err)
		}
		want.VtepDevIndex = p.Attrs().Index
	}
	if v.LocalIP.IsValid() {
		want.SrcAddr = net.IP(v.LocalIP.AsSlice())
	}
	return want, nil
}

func sameVXLAN(link netlink.Link, want *netlink.Vxlan) bool {
	have, ok := link.(*netlink.Vxlan)
	if !ok {
		return false
	}
	sameSrc := have.SrcAddr.Equal(want.SrcAddr) || (len(have.SrcAddr) == 0 && len(want.SrcAddr) == 0)
	return have.VxlanId == want.VxlanId && have.Port == want.Port && have.VtepDevIndex == want.VtepDevIndex &&
		sameSrc && !have.Learning
}

func (h *Devices) setMTUAndMAC(link netlink.Link, mtu int, mac desired.MAC) error {
	if mtu > 0 && link.Attrs().MTU != mtu {
		if err := h.nl.LinkSetMTU(link, mtu); err != nil {
			return fmt.Errorf("set mtu %d: %w", mtu, err)
		}
	}
	if have, _ := desired.MACFrom(link.Attrs().HardwareAddr); !mac.IsZero() && have != mac {
		if err := h.nl.LinkSetHardwareAddr(link, mac.HardwareAddr()); err != nil {
			return fmt.Errorf("set address %s: %w", mac, err)
		}
	}
	return nil
}

// EnsureVeth makes a veth pair name <-> peer exist, with both ends up and the
// given MTU (0 keeps the kernel's default). An existing link with that name
// that is not a veth is an error; it is not replaced.
func (h *Devices) EnsureVeth(name, peer string, mtu int) error {
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
	if err := setMTUAndUp(h.nl, link, mtu); err != nil {
		return fmt.Errorf("ensure veth %s: %w", name, err)
	}
	peerLink, err := h.nl.LinkByName(peer)
	if err != nil {
		return fmt.Errorf("ensure veth %s: peer %s: %w", name, peer, err)
	}
	if err := setMTUAndUp(h.nl, peerLink, mtu); err != nil {
		return fmt.Errorf("ensure veth %s: peer %s: %w", name, peer, err)
	}
	return nil
}

// AddVethPeerIn creates a pod's veth pair (local-pods' host side, named
// desired.HostVethPrefix…) in one step: name (with hardware address
// mac, if not nil) in the handle's namespace and peer (with peerMAC, if not
// nil; else the kernel picks one) directly inside the network namespace at
// peerNS, so the peer never exists under its final name in this namespace.
// Both ends are left down, so that per-link settings can be written before
// traffic flows. mtu 0 keeps the kernel's default. An existing link called
// name is an error (EEXIST).
func (h *Devices) AddVethPeerIn(name string, mac net.HardwareAddr, peer string, peerMAC net.HardwareAddr, peerNS string,
	mtu int) error {
	ns, err := netns.GetFromPath(peerNS)
	if err != nil {
		return fmt.Errorf("add veth %s: peer namespace %s: %w", name, peerNS, err)
	}
	defer func() { _ = ns.Close() }()
	veth := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: name, MTU: mtu, HardwareAddr: mac},
		PeerName:         peer,
		PeerHardwareAddr: peerMAC,
		PeerNamespace:    netlink.NsFd(ns),
	}
	if mtu > 0 {
		veth.PeerMTU = uint32(mtu)
	}
	if err := h.nl.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s (peer %s in %s): %w", name, peer, peerNS, err)
	}
	return nil
}

// EnsureBridge makes the named bridge exist and be up.
func (h *Devices) EnsureBridge(name string) error {
	_, err := h.nl.LinkByName(name)
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		err = h.nl.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}})
	}
	if err != nil {
		return fmt.Errorf("ensure bridge %s: %w", name, err)
	}
	link, err := h.nl.LinkByName(name)
	if err == nil {
		err = setMTUAndUp(h.nl, link, 0)
	}
	if err != nil {
		return fmt.Errorf("ensure bridge %s: %w", name, err)
	}
	return nil
}
