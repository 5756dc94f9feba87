package bgp

import (
	"context"
	"fmt"
	"time"

	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// watchPeers subscribes to the server's session state changes: each one
// wakes the Changed channel and calls Config.OnPeerChange. GoBGP updates a
// peer's state before it reports the change, so a reader woken by Changed
// sees the new state in Peers.
func (s *Speaker) watchPeers() error {
	ctx, cancel := context.WithCancel(context.Background())
	s.cancelWatch = cancel
	err := s.srv.WatchEvent(ctx, server.WatchEventMessageCallbacks{
		OnPeerUpdate: func(*apiutil.WatchEventMessage_PeerEvent, time.Time) { s.peersChanged() },
	}, server.WatchPeer())
	if err != nil {
		return fmt.Errorf("watch bgp session states: %w", err)
	}
	return nil
}

// peersChanged wakes everyone waiting on Changed and tells the owner.
func (s *Speaker) peersChanged() {
	s.changeMu.Lock()
	if s.watchEnded { // a change reported while the speaker stops
		s.changeMu.Unlock()
		return
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.changeMu.Unlock()
	if s.cfg.OnPeerChange != nil {
		s.cfg.OnPeerChange()
	}
}

// Changed returns a channel that is closed at the next change of a session's
// state and when the speaker stops (a stopped speaker's channel is closed
// already). Take the channel before reading Peers, so that a change between
// the read and the wait is not missed.
func (s *Speaker) Changed() <-chan struct{} {
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	return s.changed
}

// endWatch stops the subscription and leaves Changed closed for good.
func (s *Speaker) endWatch() {
	if s.cancelWatch != nil {
		s.cancelWatch()
	}
	s.changeMu.Lock()
	defer s.changeMu.Unlock()
	if !s.watchEnded {
		s.watchEnded = true
		close(s.changed)
	}
}
