package datapath

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/bgpstatus"
)

// changeNotifier is a speaker that tells when its sessions change;
// *bgp.Speaker is one.
type changeNotifier interface {
	Changed() <-chan struct{}
}

// Recheck is how long a caller of BGPSessions waits before asking again
// when it cannot be told of the next change: the node runs no speaker for
// the network yet (speakers start in the loop's passes), or the speaker
// cannot report changes.
const Recheck = 250 * time.Millisecond

// BGPSessions returns the status of the peers of the node's speaker for
// network, whether the node runs one, and a channel that is closed when
// either may have changed: at the speaker's next session state change or
// stop, or after Recheck when there is no speaker to watch. The channel is
// taken before the peers are read, so no change between the read and the
// wait is missed. It is safe to call from any goroutine.
func (s *BGPPart) BGPSessions(ctx context.Context, network string) ([]bgpstatus.PeerStatus, bool, <-chan struct{}, error) {
	s.mu.Lock()
	r, ok := s.speakers[network]
	s.mu.Unlock()
	if !ok {
		return nil, false, recheck(), nil
	}
	changed := recheck()
	if n, watches := r.sp.(changeNotifier); watches {
		select {
		case <-n.Changed(): // stopped, about to be replaced or removed
		default:
			changed = n.Changed()
		}
	}
	peers, err := r.sp.Peers(ctx)
	if err != nil {
		return nil, true, changed, fmt.Errorf("network %s: %w", network, err)
	}
	return peers, true, changed, nil
}

// recheck returns a channel closed after Recheck.
func recheck() <-chan struct{} {
	ch := make(chan struct{})
	time.AfterFunc(Recheck, func() { close(ch) })
	return ch
}

// EncodeBGPPeers is the value of estuaryv1.AnnotationBGPPeers for the peers
// of each network's speaker: compact JSON, networks and peers in order.
// No network gives "" (the annotation is removed).
func EncodeBGPPeers(nets map[string][]bgpstatus.PeerStatus) (string, error) {
	if len(nets) == 0 {
		return "", nil
	}
	out := make(map[string][]estuaryv1.NodeBGPPeer, len(nets))
	for _, name := range slices.Sorted(maps.Keys(nets)) {
		peers := slices.SortedFunc(slices.Values(nets[name]), func(a, b bgpstatus.PeerStatus) int { return a.Address.Compare(b.Address) })
		list := make([]estuaryv1.NodeBGPPeer, 0, len(peers))
		for _, p := range peers {
			list = append(list, estuaryv1.NodeBGPPeer{Address: p.Address.String(), ASN: int64(p.ASN), State: string(p.State)})
		}
		out[name] = list
	}
	b, err := json.Marshal(out) // map keys are sorted
	if err != nil {
		return "", fmt.Errorf("encode bgp session states: %w", err)
	}
	return string(b), nil
}

// publishBGPPeers writes the session states of the node's speakers on its
// Node (estuaryv1.AnnotationBGPPeers) when they differ from what node, as
// the cache has it, carries, and removes the annotation when the node runs
// no speaker. Only this node's daemon writes it, so the merge patch never
// conflicts with another writer. A speaker that cannot report its peers
// leaves the annotation as it is until the next pass.
func (s *BGPPart) publishBGPPeers(ctx context.Context, node *corev1.Node) error {
	nets, err := s.BGPPeers(ctx)
	if err != nil {
		return fmt.Errorf("node %s: bgp session states not published: %w", node.Name, err)
	}
	s.noteBGPSessions(nets)
	value, err := EncodeBGPPeers(nets)
	if err != nil {
		return fmt.Errorf("node %s: %w", node.Name, err)
	}
	have, present := node.Annotations[estuaryv1.AnnotationBGPPeers]
	if present == (value != "") && have == value {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, estuaryv1.AnnotationBGPPeers)
	if value != "" {
		patch = fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, estuaryv1.AnnotationBGPPeers, value)
	}
	// A fresh object: the patch's answer must not land in the cache's Node.
	target := &corev1.Node{}
	target.Name = node.Name
	if err := s.cfg.Client.Patch(ctx, target, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return fmt.Errorf("node %s: publish bgp session states in annotation %s: %w", node.Name, estuaryv1.AnnotationBGPPeers, err)
	}
	s.cfg.Log.V(1).Info("published bgp session states", "node", node.Name, "states", value)
	return nil
}
