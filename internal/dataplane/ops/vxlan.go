package ops

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/state"
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
	MAC     state.MAC
}

// EnsureVXLANDevice makes the device exist with the attributes of v and
// returns its MAC; it does not change whether the device is up, and a device
// it creates is down, so per-device settings can be written before traffic
// flows. Learning is off: the FDB is written by estuary. A link of that name
// that is not a VXLAN device, or whose VNI, port, parent, local address or
// learning differ, is deleted and created again (the kernel cannot change
// them in place); a different MTU or MAC is set in place.
func (h *Handle) EnsureVXLANDevice(v VXLAN) (net.HardwareAddr, error) {
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

func (h *Handle) vxlanLink(v VXLAN) (*netlink.Vxlan, error) {
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

func (h *Handle) setMTUAndMAC(link netlink.Link, mtu int, mac state.MAC) error {
	if mtu > 0 && link.Attrs().MTU != mtu {
		if err := h.nl.LinkSetMTU(link, mtu); err != nil {
			return fmt.Errorf("set mtu %d: %w", mtu, err)
		}
	}
	if have, _ := state.MACFrom(link.Attrs().HardwareAddr); !mac.IsZero() && have != mac {
		if err := h.nl.LinkSetHardwareAddr(link, mac.HardwareAddr()); err != nil {
			return fmt.Errorf("set address %s: %w", mac, err)
		}
	}
	return nil
}

// ResolvedNeighs lists the neighbour entries on the named link that were
// resolved rather than configured: not permanent, not proxy, with a MAC
// (reachable, stale, or being confirmed).
func (h *Handle) ResolvedNeighs(dev string) ([]state.Neigh, error) {
	link, err := h.nl.LinkByName(dev)
	if err != nil {
		return nil, fmt.Errorf("neighbours of %s: %w", dev, err)
	}
	const resolved = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE
	var out []state.Neigh
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		ns, err := retryDump("neighbours of "+dev, func() ([]netlink.Neigh, error) { return h.nl.NeighList(link.Attrs().Index, fam) })
		if err != nil {
			return nil, err
		}
		for _, n := range ns {
			mac, err := state.MACFrom(n.HardwareAddr)
			if n.State&resolved == 0 || n.State&netlink.NUD_PERMANENT != 0 || err != nil || mac.IsZero() {
				continue
			}
			out = append(out, state.Neigh{Dev: dev, IP: addrOf(n.IP), MAC: mac})
		}
	}
	return out, nil
}

// SetNeigh writes one neighbour entry (replace semantics) on the named link,
// looked up by name alone: the L2-miss answerer's write, cheaper than Apply.
func (h *Handle) SetNeigh(n state.Neigh) error {
	link, err := h.nl.LinkByName(n.Dev)
	if err != nil {
		return fmt.Errorf("add %s: %w", n, err)
	}
	l := &linkIndexes{h: h, known: map[string]int{n.Dev: link.Attrs().Index}}
	return h.addNeigh(l, n)
}
