package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	api "github.com/osrg/gobgp/v4/api"
)

// SessionState is a BGP session's finite state machine state (RFC 4271).
type SessionState string

// Session states.
const (
	StateUnknown     SessionState = "Unknown"
	StateIdle        SessionState = "Idle"
	StateConnect     SessionState = "Connect"
	StateActive      SessionState = "Active"
	StateOpenSent    SessionState = "OpenSent"
	StateOpenConfirm SessionState = "OpenConfirm"
	StateEstablished SessionState = "Established"
)

var sessionStates = map[api.PeerState_SessionState]SessionState{
	api.PeerState_SESSION_STATE_IDLE:        StateIdle,
	api.PeerState_SESSION_STATE_CONNECT:     StateConnect,
	api.PeerState_SESSION_STATE_ACTIVE:      StateActive,
	api.PeerState_SESSION_STATE_OPENSENT:    StateOpenSent,
	api.PeerState_SESSION_STATE_OPENCONFIRM: StateOpenConfirm,
	api.PeerState_SESSION_STATE_ESTABLISHED: StateEstablished,
}

// PeerStatus is what the speaker observes of one peer.
type PeerStatus struct {
	// Address is the peer's address.
	Address netip.Addr
	// ASN is the peer's configured AS number.
	ASN uint32
	// State is the session state.
	State SessionState
	// Uptime is how long the session has been Established; zero otherwise.
	Uptime time.Duration
	// Received counts the prefixes the peer sent (all kept out of the RIB by
	// the node's import policy).
	Received uint64
	// Advertised counts the prefixes sent to the peer.
	Advertised uint64
	// GracefulRestart reports whether the session negotiated graceful
	// restart, so the peer keeps the node's routes while the speaker restarts.
	GracefulRestart bool
}

// Established reports whether the session is up.
func (p PeerStatus) Established() bool { return p.State == StateEstablished }

// Peers returns the status of every configured peer, ordered by address. A
// stopped speaker has none.
func (s *Speaker) Peers(ctx context.Context) ([]PeerStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil, nil
	}
	var out []PeerStatus
	err := s.srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		out = append(out, peerStatus(p))
	})
	if err != nil {
		return nil, fmt.Errorf("list bgp peers: %w", err)
	}
	slices.SortFunc(out, func(a, b PeerStatus) int { return a.Address.Compare(b.Address) })
	return out, nil
}

func peerStatus(p *api.Peer) PeerStatus {
	var st PeerStatus
	if c := p.GetConf(); c != nil {
		st.Address, _ = netip.ParseAddr(c.GetNeighborAddress())
		st.ASN = c.GetPeerAsn()
	}
	st.State = StateUnknown
	if v, ok := sessionStates[p.GetState().GetSessionState()]; ok {
		st.State = v
	}
	if up := p.GetTimers().GetState().GetUptime(); st.State == StateEstablished && up != nil && up.GetSeconds() > 0 {
		st.Uptime = time.Since(up.AsTime()).Truncate(time.Second)
	}
	for _, af := range p.GetAfiSafis() {
		st.Received += af.GetState().GetReceived()
		st.Advertised += af.GetState().GetAdvertised()
	}
	if st.State == StateEstablished && p.GetGracefulRestart().GetEnabled() {
		for _, c := range p.GetState().GetRemoteCap() {
			if c.GetGracefulRestart() != nil {
				st.GracefulRestart = true
			}
		}
	}
	return st
}

// apiPeer is GoBGP's configuration of p: IPv4 and IPv6 unicast, graceful
// restart unless disabled, active connections only when the speaker does not
// listen. restarting sets the Restart State of a speaker that replaces an
// earlier one.
func (s *Speaker) apiPeer(p Peer, restarting bool) *api.Peer {
	gr := p.restartTime() > 0
	families := []*api.AfiSafi{}
	for _, f := range []*api.Family{
		{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST},
		{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST},
	} {
		families = append(families, &api.AfiSafi{
			Config:            &api.AfiSafiConfig{Family: f, Enabled: true},
			MpGracefulRestart: &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: gr}},
		})
	}
	out := &api.Peer{
		Conf: &api.PeerConf{
			NeighborAddress: p.Address.String(),
			PeerAsn:         p.ASN,
			AuthPassword:    p.Password,
		},
		Timers:   &api.Timers{Config: &api.TimersConfig{ConnectRetry: ConnectRetrySeconds}},
		AfiSafis: families,
	}
	if gr {
		out.GracefulRestart = &api.GracefulRestart{
			Enabled:         true,
			RestartTime:     p.restartTime(),
			DeferralTime:    DeferralTime,
			LocalRestarting: restarting,
		}
	}
	return out
}
