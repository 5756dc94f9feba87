package ops

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// ErrLinkNotFound is returned (wrapped) by Links.Get when no link has the name.
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

// Get returns the named link. A missing link is an error wrapping
// ErrLinkNotFound.
func (h *Links) Get(name string) (Link, error) {
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

// List lists the links whose names start with prefix, ordered by index.
func (h *Links) List(prefix string) ([]Link, error) {
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

// Index returns the index of the named link.
func (h *Links) Index(name string) (int, error) {
	link, err := h.nl.LinkByName(name)
	if err != nil {
		return 0, fmt.Errorf("link %s: %w", name, err)
	}
	return link.Attrs().Index, nil
}

// Indexes maps the name of every link in the namespace to its index
// (Read's lean link dump).
func (h *Links) Indexes() (map[string]int, error) {
	l, err := h.links()
	if err != nil {
		return nil, err
	}
	return l.byName, nil
}

// SetAlias sets the named link's IFLA_IFALIAS (at most 255 bytes).
func (h *Links) SetAlias(name, alias string) error {
	link, err := h.nl.LinkByName(name)
	if err == nil {
		err = h.nl.LinkSetAlias(link, alias)
	}
	if err != nil {
		return fmt.Errorf("set alias of link %s: %w", name, err)
	}
	return nil
}

// SetMAC sets the named link's hardware address; a link that already
// has it is left alone. A veth's address can change while it is up.
func (h *Links) SetMAC(name string, mac net.HardwareAddr) error {
	link, err := h.nl.LinkByName(name)
	if err == nil && !bytes.Equal(link.Attrs().HardwareAddr, mac) {
		err = h.nl.LinkSetHardwareAddr(link, mac)
	}
	if err != nil {
		return fmt.Errorf("set address %s of link %s: %w", mac, name, err)
	}
	return nil
}

// SetUp brings the named link up; a link already up is success.
func (h *Links) SetUp(name string) error {
	link, err := h.nl.LinkByName(name)
	if err == nil {
		err = setMTUAndUp(h.nl, link, 0)
	}
	if err != nil {
		return fmt.Errorf("set link %s up: %w", name, err)
	}
	return nil
}

// Delete deletes the named link; a link that does not exist is success.
func (h *Links) Delete(name string) error {
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
func (h *Links) deleteLink(link netlink.Link) error {
	if err := h.nl.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
		return fmt.Errorf("delete link %s: %w", link.Attrs().Name, err)
	}
	return nil
}

// setMTUAndUp sets link's MTU (unless mtu is 0) and brings it up, each only
// when it differs.
func setMTUAndUp(nl *netlink.Handle, link netlink.Link, mtu int) error {
	if mtu > 0 && link.Attrs().MTU != mtu {
		if err := nl.LinkSetMTU(link, mtu); err != nil {
			return fmt.Errorf("set mtu %d: %w", mtu, err)
		}
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := nl.LinkSetUp(link); err != nil {
			return fmt.Errorf("set up: %w", err)
		}
	}
	return nil
}
