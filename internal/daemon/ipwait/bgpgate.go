package ipwait

import (
	"context"
	"fmt"
	"strings"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/daemon/bgp"
)

// BGPSessions is what the ADD gate needs of the node's BGP speakers;
// *netsync.Syncer implements it.
type BGPSessions interface {
	// BGPSessions returns the status of the peers of the node's speaker for
	// network, whether the node runs one, and a channel closed when either
	// may have changed.
	BGPSessions(ctx context.Context, network string) (peers []bgp.PeerStatus, running bool, changed <-chan struct{}, err error)
}

// SetBGPSessions installs the gate: once a pod's addresses are known, Wait
// also waits, for each of their networks in mode BGP whose
// spec.bgpWaitForPeer is not false, until the node's speaker for it has an
// Established session, so the pod's address can be announced before it
// runs. Call it before the first Wait; without it Wait does not gate.
func (w *Waiter) SetBGPSessions(s BGPSessions) { w.sessions = s }

// waitPeers is the gate: it returns once every BGP network of networks that
// waits for a peer has an Established session on this node, or fails when
// ctx ends, naming the pod, the network and each peer with its state.
// A network missing from the cache is not waited for: nothing says it wants
// to wait.
func (w *Waiter) waitPeers(ctx context.Context, key string, networks []estuaryv1.Network) error {
	if w.sessions == nil {
		return nil
	}
	for i := range networks {
		if !networks[i].Spec.WaitsForBGPPeer() {
			continue
		}
		if err := w.waitEstablished(ctx, key, networks[i].Name); err != nil {
			return err
		}
	}
	return nil
}

// waitEstablished waits until the node's speaker for network has an
// Established session.
func (w *Waiter) waitEstablished(ctx context.Context, key, network string) error {
	for {
		peers, running, changed, err := w.sessions.BGPSessions(ctx, network)
		if err == nil && running && anyEstablished(peers) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return cniserver.WithReason(cniserver.ReasonBGPSession,
				fmt.Errorf("pod %s: network %s: no Established BGP session on node %s (%s); "+
					"set spec.bgpWaitForPeer to false on the network to let pods start without one: %w",
					key, network, w.node, describeSessions(peers, running, err), ctx.Err()))
		}
	}
}

func anyEstablished(peers []bgp.PeerStatus) bool {
	for _, p := range peers {
		if p.Established() {
			return true
		}
	}
	return false
}

// describeSessions says what the node's speaker last reported.
func describeSessions(peers []bgp.PeerStatus, running bool, err error) string {
	switch {
	case !running:
		return "the node runs no BGP speaker for it; see the daemon's log"
	case err != nil:
		return fmt.Sprintf("its sessions could not be read: %v", err)
	case len(peers) == 0:
		return "the node's speaker has no peer configured; see the daemon's log"
	}
	parts := make([]string, 0, len(peers))
	for _, p := range peers {
		parts = append(parts, fmt.Sprintf("peer %s (AS %d) %s", p.Address, p.ASN, p.State))
	}
	return strings.Join(parts, ", ")
}
