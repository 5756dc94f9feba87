package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	api "github.com/osrg/gobgp/v4/api"

	"github.com/estuary-cni/estuary/internal/bgpstatus"
)

var sessionStates = map[api.PeerState_SessionState]bgpstatus.SessionState{
	api.PeerState_SESSION_STATE_IDLE:        bgpstatus.StateIdle,
	api.PeerState_SESSION_STATE_CONNECT:     bgpstatus.StateConnect,
	api.PeerState_SESSION_STATE_ACTIVE:      bgpstatus.StateActive,
	api.PeerState_SESSION_STATE_OPENSENT:    bgpstatus.StateOpenSent,
	api.PeerState_SESSION_STATE_OPENCONFIRM: bgpstatus.StateOpenConfirm,
	api.PeerState_SESSION_STATE_ESTABLISHED: bgpstatus.StateEstablished,
}

// Peers returns the status of every configured peer, ordered by address. A
// stopped speaker has none.
func (s *Speaker) Peers(ctx context.Context) ([]bgpstatus.PeerStatus, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil, nil
	}
	var out []bgpstatus.PeerStatus
	err := s.srv.ListPeer(ctx, &api.ListPeerRequest{EnableAdvertised: true}, func(p *api.Peer) {
		out = append(out, peerStatus(p))
	})
	if err != nil {
		return nil, fmt.Errorf("list bgp peers: %w", err)
	}
	slices.SortFunc(out, func(a, b bgpstatus.PeerStatus) int { return a.Address.Compare(b.Address) })
	return out, nil
}

func peerStatus(p *api.Peer) bgpstatus.PeerStatus {
	var st bgpstatus.PeerStatus
	if c := p.GetConf(); c != nil {
		st.Address, _ = netip.ParseAddr(c.GetNeighborAddress())
		st.ASN = c.GetPeerAsn()
	}
	st.State = bgpstatus.StateUnknown
	if v, ok := sessionStates[p.GetState().GetSessionState()]; ok {
		st.State = v
	}
	if up := p.GetTimers().GetState().GetUptime(); st.State == bgpstatus.StateEstablished && up != nil && up.GetSeconds() > 0 {
		st.Uptime = time.Since(up.AsTime()).Truncate(time.Second)
	}
	for _, af := range p.GetAfiSafis() {
		st.Received += af.GetState().GetReceived()
		st.Advertised += af.GetState().GetAdvertised()
	}
	if st.State == bgpstatus.StateEstablished && p.GetGracefulRestart().GetEnabled() {
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
