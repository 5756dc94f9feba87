package datapath

import (
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/estuary-cni/estuary/internal/daemon/translate"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// Snapshot is what one pass works from: the pass's one read of the cache
// and the endpoint store, what follows from it, and the values a part hands
// the parts after it. The objects are the cache's own: read-only.
type Snapshot struct {
	// Objects are the cached networks, subnets, Nodes and other nodes'
	// records.
	Objects translate.Objects
	// Endpoints are the attachments of the endpoint store; Pods their
	// addresses (translate.LocalPods).
	Endpoints []endpointstore.Endpoint
	Pods      []netip.Addr
	// Self is this node's Node in Objects, nil when it is not in the cache.
	Self *corev1.Node

	// Tunnel is this node's VXLAN device as the VTEP part published it on
	// the Node; nil without an Overlay network or when it could not be
	// computed or published. The overlay part applies only a published
	// tunnel.
	Tunnel *overlay.Config
	// Overlay is the overlay's input once the overlay part computed it
	// (even when applying it failed), nil before; the fast path reads it.
	Overlay *overlay.Input

	parent   func() (overlay.Parent, error)
	underlay func() (underlay.Input, error)
}

// NewSnapshot returns the snapshot of node's view: objs and eps, with
// parent resolving the tunnel's parent link (the loop resolves it at most
// once per pass).
func NewSnapshot(node string, objs translate.Objects, eps []endpointstore.Endpoint, parent func() (overlay.Parent, error)) *Snapshot {
	pods, _ := translate.LocalPods(eps, nil)
	snap := &Snapshot{Objects: objs, Endpoints: eps, Pods: pods, parent: parent}
	for _, n := range objs.Nodes {
		if n.Name == node {
			snap.Self = n
			break
		}
	}
	snap.underlay = sync.OnceValues(func() (underlay.Input, error) {
		if snap.Self == nil {
			return underlay.Input{}, nil
		}
		return translate.BuildUnderlayInput(snap.Self, "", snap.Objects, snap.Pods)
	})
	return snap
}

// Parent returns the tunnel's parent link as it resolves in this pass.
func (s *Snapshot) Parent() (overlay.Parent, error) { return s.parent() }

// UnderlayInput returns translate.BuildUnderlayInput of Self, computed once
// per pass for the underlay and for the overlay's NAT, with the objects it
// skipped; without Self, an empty input. Its slices are shared: a part
// that changes one copies it first.
func (s *Snapshot) UnderlayInput() (underlay.Input, error) { return s.underlay() }
