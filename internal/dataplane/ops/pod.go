package ops

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/estuary-cni/estuary/internal/dataplane/state"
)

// ErrLinkNotFound is returned (wrapped) by Link when no link has the name.
var ErrLinkNotFound = errors.New("link not found")

// Link describes one link as the kernel reports it.
type Link struct {
	Name  string
	Index int
	// Type is the kernel's link kind, e.g. "veth".
	Type string
	MAC  net.HardwareAddr
	Up   bool
	// PeerIndex is the index of a veth's other end in its own namespace
	// (IFLA_LINK); 0 when the kernel reports none.
	PeerIndex int
	// Alias is the link's IFLA_IFALIAS, "" when it has none.
	Alias string
}

// Link returns the named link. A missing link is an error wrapping
// ErrLinkNotFound.
func (h *Handle) Link(name string) (Link, error) {
	link, err := h.nl.LinkByName(name)
	if errors.As(err, &netlink.LinkNotFoundError{}) {
		return Link{}, fmt.Errorf("link %s: %w", name, ErrLinkNotFound)
	}
	if err != nil {
		return Link{}, fmt.Errorf("link %s: %w", name, err)
	}
	return linkOf(link), nil
}

func linkOf(link netlink.Link) Link {
	a := link.Attrs()
	return Link{
		Name:      a.Name,
		Index:     a.Index,
		Type:      link.Type(),
		MAC:       a.HardwareAddr,
		Up:        a.Flags&net.FlagUp != 0,
		PeerIndex: a.ParentIndex,
		Alias:     a.Alias,
	}
}

// Links lists the links whose names start with prefix, ordered by index.
func (h *Handle) Links(prefix string) ([]Link, error) {
	ls, err := retryDump("links", func() ([]netlink.Link, error) { return h.nl.LinkList() })
	if err != nil {
		return nil, err
	}
	var out []Link
	for _, l := range ls {
		if strings.HasPrefix(l.Attrs().Name, prefix) {
			out = append(out, linkOf(l))
		}
	}
	slices.SortFunc(out, func(a, b Link) int { return a.Index - b.Index })
	return out, nil
}

// SetLinkAlias sets the named link's IFLA_IFALIAS (at most 255 bytes).
func (h *Handle) SetLinkAlias(name, alias string) error {
	link, err := h.nl.LinkByName(name)
	if err == nil {
		err = h.nl.LinkSetAlias(link, alias)
	}
	if err != nil {
		return fmt.Errorf("set alias of link %s: %w", name, err)
	}
	return nil
}

// AddVethPeerIn creates a veth pair in one step: name (with hardware address
// mac, if not nil) in the handle's namespace and peer (with peerMAC, if not
// nil; else the kernel picks one) directly inside the network namespace at
// peerNS, so the peer never exists under its final name in this namespace.
// Both ends are left down, so that per-link settings can be written before
// traffic flows. mtu 0 keeps the kernel's default. An existing link called
// name is an error (EEXIST).
func (h *Handle) AddVethPeerIn(name string, mac net.HardwareAddr, peer string, peerMAC net.HardwareAddr, peerNS string,
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

// SetLinkMAC sets the named link's hardware address; a link that already
// has it is left alone. A veth's address can change while it is up.
func (h *Handle) SetLinkMAC(name string, mac net.HardwareAddr) error {
	link, err := h.nl.LinkByName(name)
	if err == nil && !bytes.Equal(link.Attrs().HardwareAddr, mac) {
		err = h.nl.LinkSetHardwareAddr(link, mac)
	}
	if err != nil {
		return fmt.Errorf("set address %s of link %s: %w", mac, name, err)
	}
	return nil
}

// SetLinkUp brings the named link up; a link already up is success.
func (h *Handle) SetLinkUp(name string) error {
	link, err := h.nl.LinkByName(name)
	if err == nil {
		err = h.setMTUAndUp(link, 0)
	}
	if err != nil {
		return fmt.Errorf("set link %s up: %w", name, err)
	}
	return nil
}

// AddOnlinkRoute writes r (replacing any route with its table and
// destination) with the onlink flag: the gateway is taken to be directly on
// r.Dev even though no route or address says so. Pods use it for their
// default route via a link-local next hop that exists nowhere.
func (h *Handle) AddOnlinkRoute(r state.Route) error {
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
