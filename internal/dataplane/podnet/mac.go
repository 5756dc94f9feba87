package podnet

// Pinned MAC. A Spec may fix the MAC address of the pod's interface
// (Spec.MAC, from the IPInstances' spec.address.mac). Plumb then creates
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

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
)

// peerMAC is the MAC to create the pod side with: nil lets the kernel
// choose.
func (p *plumbing) peerMAC() net.HardwareAddr {
	if p.s.MAC.IsZero() {
		return nil
	}
	return p.s.MAC.HardwareAddr()
}

// pin gives the pod side pl of a reused pair the pinned MAC, if it has
// another. The host side's resolved neighbour entries (the pod's addresses
// at the old MAC, which the fast path's FIB lookups would use) are deleted,
// so the host resolves the pod again.
func (p *plumbing) pin(pl ops.Link) error {
	if have, _ := desired.MACFrom(pl.MAC); p.s.MAC.IsZero() || have == p.s.MAC {
		return nil
	}
	if err := p.pod.Links().SetMAC(p.s.IfName, p.s.MAC.HardwareAddr()); err != nil {
		return fmt.Errorf("pod side %s: %w", p.s.IfName, err)
	}
	stale, err := p.host.Neighs().Resolved(p.hostVeth)
	if err == nil {
		err = p.host.Apply(desired.Plan{DelNeighs: stale})
	}
	if err != nil {
		return fmt.Errorf("host side %s: forget the pod's old MAC: %w", p.hostVeth, err)
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
	if have, _ := desired.MACFrom(pl.MAC); have != alias.mac {
		return fmt.Errorf("interface %s has MAC %s, not the pinned %s", p.s.IfName, pl.MAC, alias.mac)
	}
	return nil
}
