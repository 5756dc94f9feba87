package ops

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

func kernelNeigh(l *linkIndexes, n desired.Neigh) (*netlink.Neigh, error) {
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

func (h *Neighs) add(l *linkIndexes, n desired.Neigh) error {
	kn, err := kernelNeigh(l, n)
	if err == nil {
		err = h.nl.NeighSet(kn)
	}
	if err != nil {
		return fmt.Errorf("add %s: %w", n, err)
	}
	return nil
}

func (h *Neighs) del(l *linkIndexes, n desired.Neigh) error {
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

func kernelFDB(l *linkIndexes, e desired.FDB) (*netlink.Neigh, error) {
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
func (h *Neighs) addFDB(l *linkIndexes, e desired.FDB) error {
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

func (h *Neighs) delFDB(l *linkIndexes, e desired.FDB) error {
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

// Resolved lists the neighbour entries on the named link that were
// resolved rather than configured: not permanent, not proxy, with a MAC
// (reachable, stale, or being confirmed).
func (h *Neighs) Resolved(dev string) ([]desired.Neigh, error) {
	link, err := h.nl.LinkByName(dev)
	if err != nil {
		return nil, fmt.Errorf("neighbours of %s: %w", dev, err)
	}
	const resolved = netlink.NUD_REACHABLE | netlink.NUD_STALE | netlink.NUD_DELAY | netlink.NUD_PROBE
	var out []desired.Neigh
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		ns, err := retryDump("neighbours of "+dev, func() ([]netlink.Neigh, error) { return h.nl.NeighList(link.Attrs().Index, fam) })
		if err != nil {
			return nil, err
		}
		for _, n := range ns {
			mac, err := desired.MACFrom(n.HardwareAddr)
			if n.State&resolved == 0 || n.State&netlink.NUD_PERMANENT != 0 || err != nil || mac.IsZero() {
				continue
			}
			out = append(out, desired.Neigh{Dev: dev, IP: addrOf(n.IP), MAC: mac})
		}
	}
	return out, nil
}

// Set writes one neighbour entry (replace semantics) on the named link,
// looked up by name alone: the L2-miss answerer's write, cheaper than Apply.
func (h *Neighs) Set(n desired.Neigh) error {
	link, err := h.nl.LinkByName(n.Dev)
	if err != nil {
		return fmt.Errorf("add %s: %w", n, err)
	}
	l := &linkIndexes{c: h.conn, known: map[string]int{n.Dev: link.Attrs().Index}}
	return h.add(l, n)
}

func (h *Neighs) read(l links) ([]desired.Neigh, error) {
	var out []desired.Neigh
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		ns, err := retryDump("neighbours", func() ([]netlink.Neigh, error) { return h.nl.NeighList(0, fam) })
		if err != nil {
			return nil, err
		}
		for _, n := range ns {
			if n.State&netlink.NUD_PERMANENT == 0 {
				continue
			}
			mac, _ := desired.MACFrom(n.HardwareAddr)
			out = append(out, desired.Neigh{Dev: l.byIndex[n.LinkIndex], IP: addrOf(n.IP), MAC: mac, Permanent: true})
		}
		ps, err := retryDump("proxy neighbours", func() ([]netlink.Neigh, error) { return h.nl.NeighProxyList(0, fam) })
		if err != nil {
			return nil, err
		}
		for _, n := range ps {
			out = append(out, desired.Neigh{Dev: l.byIndex[n.LinkIndex], IP: addrOf(n.IP), Proxy: true})
		}
	}
	return out, nil
}

func (h *Neighs) readFDB(l links, sc Scope) ([]desired.FDB, error) {
	if sc.FDBDevice == nil {
		return nil, nil
	}
	var out []desired.FDB
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
			mac, macErr := desired.MACFrom(e.HardwareAddr)
			if e.IP == nil || macErr != nil {
				continue // a local or multicast-list entry, not a tunnel entry
			}
			out = append(out, desired.FDB{Dev: name, MAC: mac, Dst: addrOf(e.IP)})
		}
	}
	return out, nil
}
