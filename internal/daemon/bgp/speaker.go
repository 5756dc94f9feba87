package bgp

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/config/oc"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// Defaults and limits of the speaker.
const (
	// DefaultRestartTime is the graceful restart time, in seconds, for a peer
	// whose GracefulRestartSeconds is unset.
	DefaultRestartTime = 120
	// MaxRestartTime is the largest restart time the capability can carry
	// (12 bits, RFC 4724).
	MaxRestartTime = 4095
	// DeferralTime is how long, in seconds, a restarting speaker waits for
	// the End-of-RIB marker from all its peers before it advertises anyway.
	DeferralTime = 30
	// ConnectRetrySeconds is how often an unanswered peer is dialled again.
	ConnectRetrySeconds = 10
)

// ErrNotRunning is returned by Reconcile on a stopped speaker.
var ErrNotRunning = errors.New("bgp speaker is not running")

// Config is what a speaker needs besides its peers and prefixes.
type Config struct {
	// RouterID is the BGP identifier; it must be an IPv4 address.
	RouterID netip.Addr
	// LocalASN is the node's AS number (the Network's netID).
	LocalASN uint32
	// ListenPort is the TCP port to accept sessions on. Zero (the default)
	// and negative values mean do not listen: the speaker only dials its
	// peers, so several speakers can share a network namespace.
	ListenPort int
	// NextHopIPv4 is the next hop announced with IPv4 prefixes, normally the
	// node's address. Unset means each session's local address.
	NextHopIPv4 netip.Addr
	// NextHopIPv6 is the next hop announced with IPv6 prefixes. Unset means
	// each session's local address, which is only right for sessions over
	// IPv6.
	NextHopIPv6 netip.Addr
	// Restarting says that the node kept forwarding for the pods of an
	// earlier speaker (their kernel routes are still in place): the peers
	// passed to Start are told so (Restart State and Forwarding State bits),
	// so they keep the earlier speaker's routes until this one has synced.
	Restarting bool
	// Logger receives GoBGP's log. The zero value discards it.
	Logger logr.Logger
	// OnPeerChange, when set, is called after every change of a session's
	// state, on a goroutine of the speaker; it must not block.
	OnPeerChange func()
}

// Peer is one router the node peers with.
type Peer struct {
	// Address is the peer's IP address.
	Address netip.Addr
	// ASN is the peer's AS number.
	ASN uint32
	// Password is the TCP MD5 password; empty means none.
	Password string
	// GracefulRestartSeconds is the restart time advertised to this peer:
	// nil means DefaultRestartTime, 0 disables graceful restart.
	GracefulRestartSeconds *int32
}

// restartTime is the peer's effective graceful restart time in seconds.
func (p Peer) restartTime() uint32 {
	if p.GracefulRestartSeconds == nil {
		return DefaultRestartTime
	}
	return uint32(*p.GracefulRestartSeconds)
}

func (p Peer) validate() error {
	if !p.Address.IsValid() || p.Address.IsUnspecified() {
		return fmt.Errorf("peer %v: invalid address", p.Address)
	}
	if p.ASN == 0 {
		return fmt.Errorf("peer %s: AS number 0", p.Address)
	}
	if g := p.GracefulRestartSeconds; g != nil && (*g < 0 || *g > MaxRestartTime) {
		return fmt.Errorf("peer %s: graceful restart time %d outside 0-%d", p.Address, *g, MaxRestartTime)
	}
	return nil
}

// same reports whether two configurations of a peer are interchangeable.
func (p Peer) same(o Peer) bool {
	return p.Address == o.Address && p.ASN == o.ASN && p.Password == o.Password &&
		p.restartTime() == o.restartTime()
}

// Speaker is a running BGP speaker. Its methods are safe for concurrent use.
type Speaker struct {
	cfg      Config
	srv      *server.BgpServer
	stopping *atomic.Bool // set once the BGP instance is stopped

	cancelWatch context.CancelFunc // ends the session state subscription
	changeMu    sync.Mutex         // guards changed and watchEnded
	changed     chan struct{}      // closed at the next session state change
	watchEnded  bool               // the speaker stopped; changed stays closed

	mu         sync.Mutex
	running    bool
	peers      map[netip.Addr]Peer
	advertised map[netip.Prefix]struct{}
}

// Start runs a speaker with the given peers and prefixes (see Reconcile).
// The prefixes are installed before any peer is added, so the first UPDATE of
// every session is complete. ctx bounds only the start itself.
func Start(ctx context.Context, cfg Config, peers []Peer, prefixes []netip.Prefix) (*Speaker, error) {
	if !cfg.RouterID.Is4() {
		return nil, fmt.Errorf("router id %v: must be an IPv4 address", cfg.RouterID)
	}
	if cfg.LocalASN == 0 {
		return nil, errors.New("local AS number 0")
	}
	if cfg.NextHopIPv4.IsValid() && !cfg.NextHopIPv4.Is4() {
		return nil, fmt.Errorf("IPv4 next hop %s is not an IPv4 address", cfg.NextHopIPv4)
	}
	if cfg.NextHopIPv6.IsValid() && (!cfg.NextHopIPv6.Is6() || cfg.NextHopIPv6.Is4In6()) {
		return nil, fmt.Errorf("IPv6 next hop %s is not an IPv6 address", cfg.NextHopIPv6)
	}
	port := int32(-1)
	if cfg.ListenPort > 0 {
		if cfg.ListenPort > 65535 {
			return nil, fmt.Errorf("listen port %d out of range", cfg.ListenPort)
		}
		port = int32(cfg.ListenPort)
	}
	logger, stopping := newGobgpLog(cfg.Logger)
	srv := server.NewBgpServer(server.LoggerOption(logger, nil))
	go srv.Serve()
	s := &Speaker{
		cfg:        cfg,
		srv:        srv,
		stopping:   stopping,
		running:    true,
		peers:      map[netip.Addr]Peer{},
		advertised: map[netip.Prefix]struct{}{},
		changed:    make(chan struct{}),
	}
	global := &api.Global{
		Asn:        cfg.LocalASN,
		RouterId:   cfg.RouterID.String(),
		ListenPort: port,
		Families: []uint32{
			uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV4_UNICAST]),
			uint32(oc.AfiSafiTypeToIntMap[oc.AFI_SAFI_TYPE_IPV6_UNICAST]),
		},
	}
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: global}); err != nil {
		s.abort()
		return nil, fmt.Errorf("start bgp (AS %d, router id %s): %w", cfg.LocalASN, cfg.RouterID, err)
	}
	if err := s.installImportPolicy(ctx); err != nil {
		s.abort()
		return nil, err
	}
	if err := s.watchPeers(); err != nil {
		s.abort()
		return nil, err
	}
	if err := s.reconcile(ctx, peers, prefixes, cfg.Restarting); err != nil {
		s.abort()
		return nil, err
	}
	return s, nil
}

// installImportPolicy makes the node a stub: the global RIB keeps only
// locally originated paths, so nothing learned from a peer is re-advertised.
func (s *Speaker) installImportPolicy(ctx context.Context) error {
	const name = "estuary-local-only"
	policy := &api.Policy{
		Name: name,
		Statements: []*api.Statement{{
			Name:       name + "-accept",
			Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
			Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
		}},
	}
	if err := s.srv.AddPolicy(ctx, &api.AddPolicyRequest{Policy: policy}); err != nil {
		return fmt.Errorf("add import policy %s: %w", name, err)
	}
	assignment := &api.PolicyAssignment{
		Name:          "global",
		Direction:     api.PolicyDirection_POLICY_DIRECTION_IMPORT,
		Policies:      []*api.Policy{{Name: name}},
		DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT,
	}
	if err := s.srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: assignment}); err != nil {
		return fmt.Errorf("assign import policy %s: %w", name, err)
	}
	return nil
}

// Reconcile makes the speaker's peers and announced prefixes exactly the
// given ones. Prefixes are announced with the configured next hop of their
// family; host addresses of pods are given as /32 (/128) prefixes (see
// DesiredPrefixes). A peer whose AS number, password or restart time changed
// is deconfigured and added again. Reconcile is idempotent; on error it has
// applied what it could and a later call picks up the rest.
func (s *Speaker) Reconcile(ctx context.Context, peers []Peer, prefixes []netip.Prefix) error {
	return s.reconcile(ctx, peers, prefixes, false)
}

func (s *Speaker) reconcile(ctx context.Context, peers []Peer, prefixes []netip.Prefix, restarting bool) error {
	want := make(map[netip.Addr]Peer, len(peers))
	for _, p := range peers {
		if err := p.validate(); err != nil {
			return err
		}
		p.Address = p.Address.Unmap()
		if _, dup := want[p.Address]; dup {
			return fmt.Errorf("peer %s: listed twice", p.Address)
		}
		want[p.Address] = p
	}
	wantPrefixes := make(map[netip.Prefix]struct{}, len(prefixes))
	for _, p := range prefixes {
		if !p.IsValid() {
			return fmt.Errorf("prefix %v: invalid", p)
		}
		wantPrefixes[netip.PrefixFrom(p.Addr().Unmap(), unmappedBits(p)).Masked()] = struct{}{}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return ErrNotRunning
	}
	var errs []error
	for p := range s.advertised {
		if _, ok := wantPrefixes[p]; ok {
			continue
		}
		if err := s.withdraw(p); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(s.advertised, p)
	}
	for addr, have := range s.peers {
		if w, ok := want[addr]; ok && w.same(have) {
			continue
		}
		if err := s.srv.DeletePeer(ctx, &api.DeletePeerRequest{Address: addr.String()}); err != nil {
			errs = append(errs, fmt.Errorf("delete peer %s: %w", addr, err))
			continue
		}
		delete(s.peers, addr)
	}
	for _, p := range sortedPrefixes(wantPrefixes) {
		if _, ok := s.advertised[p]; ok {
			continue
		}
		if err := s.announce(p); err != nil {
			errs = append(errs, err)
			continue
		}
		s.advertised[p] = struct{}{}
	}
	for _, addr := range sortedAddrs(want) {
		if _, ok := s.peers[addr]; ok {
			continue
		}
		p := want[addr]
		if err := s.srv.AddPeer(ctx, &api.AddPeerRequest{Peer: s.apiPeer(p, restarting)}); err != nil {
			errs = append(errs, fmt.Errorf("add peer %s (AS %d): %w", addr, p.ASN, err))
			continue
		}
		s.peers[addr] = p
	}
	return errors.Join(errs...)
}

func (s *Speaker) announce(p netip.Prefix) error {
	path, err := s.path(p, false)
	if err != nil {
		return err
	}
	if _, err := s.srv.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{path}}); err != nil {
		return fmt.Errorf("announce %s: %w", p, err)
	}
	return nil
}

func (s *Speaker) withdraw(p netip.Prefix) error {
	path, err := s.path(p, true)
	if err != nil {
		return err
	}
	if err := s.srv.DeletePath(apiutil.DeletePathRequest{Paths: []*apiutil.Path{path}}); err != nil {
		return fmt.Errorf("withdraw %s: %w", p, err)
	}
	return nil
}

// Advertised returns the prefixes the speaker announces, in order.
func (s *Speaker) Advertised() []netip.Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sortedPrefixes(s.advertised)
}

// Stop shuts the speaker down without deconfiguring its sessions: peers that
// negotiated graceful restart get no NOTIFICATION and keep the node's routes
// (as stale) for their restart time; the others are sent Cease. Stop is
// idempotent.
func (s *Speaker) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil
	}
	s.running = false
	s.endWatch()
	err := s.srv.StopBgp(ctx, &api.StopBgpRequest{AllowGracefulRestart: true})
	s.releaseServer()
	if err != nil {
		return fmt.Errorf("stop bgp (AS %d): %w", s.cfg.LocalASN, err)
	}
	return nil
}

// abort stops a speaker whose start failed half way.
func (s *Speaker) abort() {
	s.running = false
	s.endWatch()
	_ = s.srv.StopBgp(context.Background(), &api.StopBgpRequest{AllowGracefulRestart: true})
	s.releaseServer()
}

// releaseServer ends the goroutines GoBGP keeps outside the BGP instance
// (BFD). BgpServer.Stop calls StopBgp again, which on the stopped instance
// only logs that it failed; that record is dropped.
func (s *Speaker) releaseServer() {
	s.stopping.Store(true)
	s.srv.Stop()
}

func sortedPrefixes(m map[netip.Prefix]struct{}) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	slices.SortFunc(out, comparePrefixes)
	return out
}

func sortedAddrs(m map[netip.Addr]Peer) []netip.Addr {
	out := make([]netip.Addr, 0, len(m))
	for a := range m {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}
