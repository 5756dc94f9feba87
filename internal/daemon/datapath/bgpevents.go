package datapath

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/estuary-cni/estuary/internal/bgpstatus"
)

// Events records Kubernetes Events on this node's Node; internal/daemon
// gives the BGP part one that writes them from a queue, so Record never
// blocks.
type Events interface {
	Record(eventType, reason, action, note string)
}

// Reasons of the BGP session Events.
const (
	ReasonBGPSessionDown = "BGPSessionDown"
	ReasonBGPSessionUp   = "BGPSessionUp"
)

// peerKey is one session: a network's peer.
type peerKey struct {
	network string
	addr    netip.Addr
}

// session is what the part last saw of one session.
type session struct {
	state bgpstatus.SessionState
	// down: a BGPSessionDown was recorded and no BGPSessionUp since.
	down bool
}

// noteBGPSessions records an Event for each session that went down (it was
// Established at the previous look and is not) and for each that came back
// after one (Established again). A session that has not come up since the
// daemon started records nothing: the Node's annotation, the Network's
// BGPPeersEstablished condition and `kubectl estuary status` show it, and
// a restarted daemon's sessions, which start from Idle, make no noise.
// Sessions of networks that left the node, and peers taken out of a
// network, are forgotten. The loop's goroutine only.
func (s *BGPPart) noteBGPSessions(nets map[string][]bgpstatus.PeerStatus) {
	seen := make(map[peerKey]bool)
	for network, peers := range nets {
		for _, p := range peers {
			k := peerKey{network, p.Address}
			seen[k] = true
			was, known := s.sessions[k]
			now := session{state: p.State, down: was.down}
			switch {
			case !known:
			case was.state == bgpstatus.StateEstablished && !p.Established():
				now.down = true
				s.record(corev1.EventTypeWarning, ReasonBGPSessionDown,
					fmt.Sprintf("network %s: BGP session with peer %s (AS %d) is down: %s", network, p.Address, p.ASN, p.State))
			case was.down && p.Established():
				now.down = false
				s.record(corev1.EventTypeNormal, ReasonBGPSessionUp,
					fmt.Sprintf("network %s: BGP session with peer %s (AS %d) is Established again", network, p.Address, p.ASN))
			}
			s.sessions[k] = now
		}
	}
	for k := range s.sessions {
		if !seen[k] {
			delete(s.sessions, k)
		}
	}
}

// record records an Event when the part has a recorder.
func (s *BGPPart) record(eventType, reason, note string) {
	if s.cfg.Events != nil {
		s.cfg.Events.Record(eventType, reason, "PeerBGP", note)
	}
}
