package ipwait

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/bgpstatus"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// BGPSessions is what the ADD gate needs of the node's BGP speakers;
// *datapath.BGPPart implements it.
type BGPSessions interface {
	// BGPSessions returns the status of the peers of the node's speaker for
	// network, whether the node runs one, and a channel closed when either
	// may have changed.
	BGPSessions(ctx context.Context, network string) (peers []bgpstatus.PeerStatus, running bool, changed <-chan struct{}, err error)
}

// waitPeers is the gate, with the sessions New is given: once a pod's
// addresses are known, Wait also waits, for each of their networks in mode
// BGP whose spec.bgpWaitForPeer is not false, until the node's speaker for
// it has the sessions the network requires (Ready), so the pod's address
// can be announced before it runs. An address of the GlobalBGP network is
// announced by the speaker of the node's BGP network, so it waits as that
// network says; on a node outside every BGP domain nothing can announce it
// and the ADD fails at once. Without sessions Wait does not gate. It
// returns once every BGP network of networks that waits for a peer is Ready
// on this node, or fails when ctx ends, naming the pod, the network and
// each peer with its state. A network missing from the cache is not waited
// for: nothing says it wants to wait.
func (w *Waiter) waitPeers(ctx context.Context, key string, networks []estuaryv1.Network) error {
	if w.sessions == nil {
		return nil
	}
	for i := range networks {
		n := &networks[i]
		if n.Spec.Type == estuaryv1.NetworkTypeGlobalBGP {
			local, err := w.nodeBGPNetwork(ctx, key, n.Name)
			if err != nil {
				return err
			}
			n = &local
		}
		if n.Spec.Type != estuaryv1.NetworkTypeUnderlay || !n.Spec.WaitsForBGPPeer() {
			continue
		}
		if err := w.waitEstablished(ctx, key, n); err != nil {
			return err
		}
	}
	return nil
}

// nodeBGPNetwork is the BGP network whose domain holds this node (the first
// by name, should the admission rules have been bypassed), whose speaker
// announces the node's GlobalBGP pods.
func (w *Waiter) nodeBGPNetwork(ctx context.Context, key, global string) (estuaryv1.Network, error) {
	var node corev1.Node
	if err := w.reader.Get(ctx, client.ObjectKey{Name: w.node}, &node); err != nil {
		return estuaryv1.Network{}, fmt.Errorf("pod %s: GlobalBGP network %s: node %s: %w", key, global, w.node, err)
	}
	var list estuaryv1.NetworkList
	if err := w.reader.List(ctx, &list); err != nil {
		return estuaryv1.Network{}, fmt.Errorf("pod %s: GlobalBGP network %s: list networks: %w", key, global, err)
	}
	slices.SortFunc(list.Items, func(a, b estuaryv1.Network) int { return strings.Compare(a.Name, b.Name) })
	for _, n := range list.Items {
		if n.Spec.Type == estuaryv1.NetworkTypeUnderlay && n.DeletionTimestamp == nil &&
			netmodel.Mode(&n.Spec) == estuaryv1.NetworkModeBGP && netmodel.Attached(&n, node.Labels) {
			return n, nil
		}
	}
	return estuaryv1.Network{}, &SessionError{Err: fmt.Errorf(
		"pod %s: GlobalBGP network %s: node %s is in the domain of no BGP-mode Underlay network, "+
			"whose speaker would announce the pod's address; run GlobalBGP pods on the nodes of a BGP network",
		key, global, w.node)}
}

// waitEstablished waits until the node's speaker for network n is Ready.
func (w *Waiter) waitEstablished(ctx context.Context, key string, n *estuaryv1.Network) error {
	for {
		peers, running, changed, err := w.sessions.BGPSessions(ctx, n.Name)
		if err == nil && running && Ready(n.Spec.BGPPeers, peers) {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return &SessionError{Err: fmt.Errorf("pod %s: network %s: %s on node %s (%s); "+
				"set spec.bgpWaitForPeer to false on the network to let pods start without one: %w",
				key, n.Name, missing(n.Spec.BGPPeers), w.node, describeSessions(peers, running, err), ctx.Err())}
		}
	}
}

// Ready is the wait rule: the node's speaker has an Established session
// with at least one peer, and with every peer of spec marked
// requireEstablished.
func Ready(spec []estuaryv1.BGPPeer, peers []bgpstatus.PeerStatus) bool {
	up := map[netip.Addr]bool{}
	for _, p := range peers {
		if p.Established() {
			up[p.Address.Unmap()] = true
		}
	}
	if len(up) == 0 {
		return false
	}
	for _, p := range spec {
		a, err := netip.ParseAddr(p.Address)
		if p.RequireEstablished && (err != nil || !up[a.Unmap()]) {
			return false
		}
	}
	return true
}

// missing says what the wait rule still lacks, in its words.
func missing(spec []estuaryv1.BGPPeer) string {
	var req []string
	for _, p := range spec {
		if p.RequireEstablished {
			req = append(req, p.Address)
		}
	}
	if len(req) == 0 {
		return "no Established BGP session"
	}
	return "no Established BGP session with each of the peers marked requireEstablished (" + strings.Join(req, ", ") + ")"
}

// describeSessions says what the node's speaker last reported.
func describeSessions(peers []bgpstatus.PeerStatus, running bool, err error) string {
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
