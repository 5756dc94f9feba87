package podnet

// Pinned MAC. A pod's records may fix the MAC address of its interface
// (Address.MAC, from the IPInstances' spec.address.mac). Add then creates
// the pod side of the pair with that MAC, so the pod never has another,
// and on a pair it reuses it sets the MAC in place and makes the host side
// forget what it resolved for the pod. The host veth's alias carries the
// pinned MAC ("mac=<mac>", see endpointAlias), so Check can verify it and
// nothing else has to remember it: the pod interface and the alias keep it
// in the kernel across restarts of the daemon, with or without its state
// file. Without a pinned MAC the kernel chooses the pod side's, and Check
// does not look at it.

import (
	"fmt"
	"net"

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
)

// pinnedMAC is the MAC addrs pin for the pod's interface: zero when none
// does. Addresses that disagree (one pins a MAC the other does not, or
// two pin different ones) and a multicast MAC are errors.
func pinnedMAC(addrs []Address) (state.MAC, error) {
	if len(addrs) == 0 {
		return state.MAC{}, nil
	}
	mac := addrs[0].MAC
	for _, a := range addrs[1:] {
		if a.MAC != mac {
			return state.MAC{}, fmt.Errorf("addresses %s and %s pin different MACs for the pod's interface (%s and %s)",
				addrs[0].IP, a.IP, macOrNone(mac), macOrNone(a.MAC))
		}
	}
	if mac.IsMulticast() {
		return state.MAC{}, fmt.Errorf("address %s pins MAC %s, a multicast address; a pod's interface needs a unicast one",
			addrs[0].IP, mac)
	}
	return mac, nil
}

func macOrNone(m state.MAC) string {
	if m.IsZero() {
		return "none"
	}
	return m.String()
}

// peerMAC is the MAC to create the pod side with: nil lets the kernel
// choose.
func (p *plumbing) peerMAC() net.HardwareAddr {
	if p.mac.IsZero() {
		return nil
	}
	return p.mac.HardwareAddr()
}

// pin gives the pod side pl of a reused pair the pinned MAC, if it has
// another. The host side's resolved neighbour entries (the pod's addresses
// at the old MAC, which the fast path's FIB lookups would use) are deleted,
// so the host resolves the pod again.
func (p *plumbing) pin(pl ops.Link) error {
	if have, _ := state.MACFrom(pl.MAC); p.mac.IsZero() || have == p.mac {
		return nil
	}
	if err := p.pod.Links().SetMAC(p.a.IfName, p.mac.HardwareAddr()); err != nil {
		return p.errorf("pod side %s: %w", p.a.IfName, err)
	}
	stale, err := p.host.Neighs().Resolved(p.hostVeth)
	if err == nil {
		err = p.host.Apply(state.Plan{DelNeighs: stale})
	}
	if err != nil {
		return p.errorf("host side %s: forget the pod's old MAC: %w", p.hostVeth, err)
	}
	return nil
}

// checkMAC reports a pod side pl whose MAC is not the one the host side
// hl's alias records as pinned; nil when none is pinned.
func (p *plumbing) checkMAC(pl, hl ops.Link) error {
	alias, ok := parseEndpointAlias(hl.Alias)
	if !ok || alias.mac.IsZero() {
		return nil
	}
	if have, _ := state.MACFrom(pl.MAC); have != alias.mac {
		return fmt.Errorf("interface %s has MAC %s, not the pinned %s", p.a.IfName, pl.MAC, alias.mac)
	}
	return nil
}
