package datapath

// BGP. Each BGP-mode Underlay network of the node gets one speaker (AS =
// netID, router id and IPv4 next hop = the node's first internal IPv4
// address), started when first needed and reconciled every pass with the
// network's peers and bgp.DesiredPrefixes of its local pods and subnets
// (translate.BuildBGPNetworks). Peer passwords are read from the Secrets
// that passwordSecretRef names with the live API client (no Secret is
// listed, watched or cached by an informer), at most once per
// BGPConfig.PasswordRefresh per peer while it reads fine; a peer whose
// Secret or key is missing is left out and reported. A speaker whose
// network leaves the node withdraws its prefixes and deconfigures its peers
// before it stops. When the loop ends the speakers are stopped without
// deconfiguring (graceful restart, Stop), so peers keep the routes while
// the daemon restarts, and a speaker started for a network in which the
// endpoint store held pods at the part's first pass sets
// bgp.Config.Restarting. A change of the node's address replaces the
// speaker the same way. Every session state change pokes the loop's
// Trigger; each pass publishes the sessions on the Node (bgpstate.go) and
// records their drops and returns as Events (bgpevents.go). The part is
// built before the CNI server: the address waiter's BGP gate asks it for
// the sessions (BGPSessions) from the first ADD on.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/bgpstatus"
	"github.com/estuary-cni/estuary/internal/daemon/bgp"
	"github.com/estuary-cni/estuary/internal/daemon/translate"
)

// Speaker is a running BGP speaker's lifecycle; *bgp.Speaker implements it.
type Speaker interface {
	Reconcile(ctx context.Context, peers []bgp.Peer, prefixes []netip.Prefix) error
	Peers(ctx context.Context) ([]bgpstatus.PeerStatus, error)
	Stop(ctx context.Context) error
}

// StartSpeaker starts a speaker; StartBGP is the real one.
type StartSpeaker func(ctx context.Context, cfg bgp.Config, peers []bgp.Peer, prefixes []netip.Prefix) (Speaker, error)

// StartBGP starts a bgp.Speaker.
func StartBGP(ctx context.Context, cfg bgp.Config, peers []bgp.Peer, prefixes []netip.Prefix) (Speaker, error) {
	s, err := bgp.Start(ctx, cfg, peers, prefixes)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// stopTimeout bounds the graceful stop of the speakers when the loop ends.
const stopTimeout = 5 * time.Second

// speakerState is one speaker the part started.
type speakerState struct {
	sp  Speaker
	cfg bgp.Config
}

// BGPConfig configures the BGP part.
type BGPConfig struct {
	// Node is this node's name.
	Node string
	// Client reads the peers' password Secrets from the API server (no
	// cache) and patches this node's Node.
	Client client.Client
	// StartSpeaker starts the speakers (default StartBGP).
	StartSpeaker StartSpeaker
	// PasswordRefresh is how long a password read fine is used before it
	// is read again (default DefaultResync).
	PasswordRefresh time.Duration
	// Trigger, if set, is poked on every session state change, so that
	// the next pass publishes it.
	Trigger *Trigger
	// Events, if set, records a BGP session going down and coming back as
	// Events on the Node (bgpevents.go).
	Events Events
	Log    logr.Logger
}

// BGPPart runs one BGP speaker per BGP network of the node.
type BGPPart struct {
	cfg BGPConfig

	// The loop's goroutine only:
	startPods  []netip.Addr        // the store's pods at the first pass
	started    bool                // startPods is set
	bgpStarted map[string]bool     // networks that had a speaker in this run
	passwords  map[string]password // last password read per network, peer and key
	sessions   map[peerKey]session // the BGP sessions as last published

	mu       sync.Mutex // guards speakers
	speakers map[string]speakerState
}

var (
	_ Part    = (*BGPPart)(nil)
	_ Stopper = (*BGPPart)(nil)
)

// NewBGPPart returns the BGP part; it runs no speaker before its first
// pass.
func NewBGPPart(cfg BGPConfig) *BGPPart {
	if cfg.StartSpeaker == nil {
		cfg.StartSpeaker = StartBGP
	}
	if cfg.PasswordRefresh <= 0 {
		cfg.PasswordRefresh = DefaultResync
	}
	return &BGPPart{cfg: cfg, bgpStarted: map[string]bool{}, passwords: map[string]password{},
		sessions: map[peerKey]session{}, speakers: map[string]speakerState{}}
}

// Name implements Part.
func (*BGPPart) Name() string { return PartBGP }

// Sync makes the running speakers those of the node's BGP networks: it
// starts a missing one, reconciles every one with the peers and prefixes of
// this pass, and withdraws and stops the speaker of a network that is gone
// from the node; then it publishes the speakers' session states on the Node
// (publishBGPPeers). Each network's failure is reported; none stops the
// others.
func (s *BGPPart) Sync(ctx context.Context, snap *Snapshot) error {
	if !s.started {
		s.startPods, s.started = snap.Pods, true
	}
	node := snap.Self
	if node == nil {
		s.mu.Lock()
		n := len(s.speakers)
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		return fmt.Errorf("bgp: node %s is not in the cache; speakers left as they are", s.cfg.Node)
	}
	nets, err := translate.BuildBGPNetworks(node, snap.Objects, snap.Pods)
	if err != nil {
		s.cfg.Log.Error(err, "objects skipped while computing the bgp networks")
	}
	var errs []error
	want := map[string]bool{}
	for _, n := range nets {
		want[n.Name] = true
		errs = append(errs, s.syncSpeaker(ctx, node, n))
	}
	s.mu.Lock()
	var gone []string
	for name := range s.speakers {
		if !want[name] {
			gone = append(gone, name)
		}
	}
	s.mu.Unlock()
	for _, name := range gone {
		errs = append(errs, s.removeSpeaker(ctx, name))
	}
	errs = append(errs, s.publishBGPPeers(ctx, node))
	return errors.Join(errs...)
}

// syncSpeaker starts or reconciles the speaker of one network.
func (s *BGPPart) syncSpeaker(ctx context.Context, node *corev1.Node, n translate.BGPNetwork) error {
	peers, peerErr := s.resolvePeers(ctx, n)
	cfg, err := translate.SpeakerConfig(node, n)
	if err != nil {
		return errors.Join(peerErr, err)
	}
	s.mu.Lock()
	r, ok := s.speakers[n.Name]
	s.mu.Unlock()
	if ok && r.cfg.RouterID == cfg.RouterID && r.cfg.NextHopIPv4 == cfg.NextHopIPv4 && r.cfg.NextHopIPv6 == cfg.NextHopIPv6 {
		if err := r.sp.Reconcile(ctx, peers, n.Prefixes); err != nil {
			return errors.Join(peerErr, fmt.Errorf("network %s: bgp reconcile: %w", n.Name, err))
		}
		return peerErr
	}
	if ok {
		// The node's address changed: replace the speaker, telling the peers
		// that it restarts (the kernel routes stay).
		if err := r.sp.Stop(ctx); err != nil {
			s.cfg.Log.Error(err, "stop bgp speaker", "network", n.Name)
		}
		cfg.Restarting = true
	} else {
		cfg.Restarting = !s.bgpStarted[n.Name] && s.hadPodsAtStart(slices.Concat(n.Subnets, n.Global))
	}
	cfg.Logger = s.cfg.Log.WithName("bgp").WithValues("network", n.Name)
	if s.cfg.Trigger != nil {
		// A session state change is published on the Node by the next pass.
		cfg.OnPeerChange = s.cfg.Trigger.Poke
	}
	sp, err := s.cfg.StartSpeaker(ctx, cfg, peers, n.Prefixes)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		delete(s.speakers, n.Name)
		return errors.Join(peerErr, fmt.Errorf("network %s: start bgp speaker (AS %d): %w", n.Name, cfg.LocalASN, err))
	}
	s.speakers[n.Name] = speakerState{sp: sp, cfg: cfg}
	s.bgpStarted[n.Name] = true
	s.cfg.Log.Info("bgp speaker started", "network", n.Name, "as", cfg.LocalASN, "routerID", cfg.RouterID,
		"peers", len(peers), "prefixes", len(n.Prefixes), "restarting", cfg.Restarting)
	return peerErr
}

// removeSpeaker withdraws a gone network's prefixes, deconfigures its
// peers (they forget the node's routes at once) and stops its speaker.
func (s *BGPPart) removeSpeaker(ctx context.Context, name string) error {
	s.mu.Lock()
	r := s.speakers[name]
	delete(s.speakers, name)
	s.mu.Unlock()
	err := errors.Join(r.sp.Reconcile(ctx, nil, nil), r.sp.Stop(ctx))
	s.cfg.Log.Info("bgp speaker stopped: network gone from the node", "network", name)
	if err != nil {
		return fmt.Errorf("network %s: stop bgp speaker: %w", name, err)
	}
	return nil
}

// Stop stops every speaker without deconfiguring its sessions, so that
// peers keep the node's routes while the daemon restarts.
func (s *BGPPart) Stop(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, r := range s.speakers {
		if err := r.sp.Stop(ctx); err != nil {
			s.cfg.Log.Error(err, "stop bgp speaker", "network", name)
		}
		delete(s.speakers, name)
	}
}

// hadPodsAtStart reports whether the endpoint store held, at the part's
// first pass, a pod inside one of subnets: its kernel routes are then in place
// and the peers may still hold an earlier speaker's routes.
func (s *BGPPart) hadPodsAtStart(subnets []netip.Prefix) bool {
	for _, p := range subnets {
		if len(translate.PodsIn(s.startPods, p)) > 0 {
			return true
		}
	}
	return false
}

// resolvePeers turns the network's peers into the speaker's, with their
// passwords read from the referenced Secrets through the live client (no
// Secret is listed or watched). A peer whose Secret or key is missing is
// left out and reported; when the Secret cannot be read for another reason
// the password last read for that peer is kept, so a brief API outage does
// not tear an established session down.
func (s *BGPPart) resolvePeers(ctx context.Context, n translate.BGPNetwork) ([]bgp.Peer, error) {
	var out []bgp.Peer
	var errs []error
	for _, p := range n.Peers {
		addr, err := netip.ParseAddr(p.Address)
		if err != nil {
			errs = append(errs, fmt.Errorf("network %s: peer %q: %w", n.Name, p.Address, err))
			continue
		}
		if p.ASN < 1 || p.ASN > math.MaxUint32 {
			errs = append(errs, fmt.Errorf("network %s: peer %s: AS number %d out of range", n.Name, addr, p.ASN))
			continue
		}
		peer := bgp.Peer{Address: addr, ASN: uint32(p.ASN), GracefulRestartSeconds: p.GracefulRestartSeconds} // #nosec G115 -- bounded above
		if ref := p.PasswordSecretRef; ref != nil {
			pw, ok, err := s.password(ctx, n.Name, addr, ref)
			if err != nil {
				errs = append(errs, err)
			}
			if !ok {
				continue
			}
			peer.Password = pw
		}
		out = append(out, peer)
	}
	return out, errors.Join(errs...)
}

// password is a peer's password as last read.
type password struct {
	value string
	read  time.Time
}

// password reads a peer's password, again once PasswordRefresh has passed
// since the last read (so a rotated password is picked up); ok is false
// when the peer must be left out.
func (s *BGPPart) password(ctx context.Context, network string, peer netip.Addr,
	ref *estuaryv1.SecretKeyReference) (pw string, ok bool, err error) {
	key := strings.Join([]string{network, peer.String(), ref.Namespace, ref.Name, ref.Key}, "/")
	last, known := s.passwords[key]
	if known && time.Since(last.read) < s.cfg.PasswordRefresh {
		return last.value, true, nil
	}
	var sec corev1.Secret
	getErr := s.cfg.Client.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &sec)
	switch {
	case apierrors.IsNotFound(getErr):
		delete(s.passwords, key)
		return "", false, fmt.Errorf("network %s: peer %s skipped: password secret %s/%s: %w",
			network, peer, ref.Namespace, ref.Name, getErr)
	case getErr != nil:
		return last.value, known, fmt.Errorf("network %s: peer %s: password secret %s/%s (last password kept: %t): %w",
			network, peer, ref.Namespace, ref.Name, known, getErr)
	}
	v, found := sec.Data[ref.Key]
	if !found {
		delete(s.passwords, key)
		return "", false, fmt.Errorf("network %s: peer %s skipped: password secret %s/%s has no key %q",
			network, peer, ref.Namespace, ref.Name, ref.Key)
	}
	s.passwords[key] = password{value: string(v), read: time.Now()}
	return string(v), true, nil
}

// BGPPeers returns, per BGP network on the node, the status of its
// speaker's peers. It is safe to call from any goroutine.
func (s *BGPPart) BGPPeers(ctx context.Context) (map[string][]bgpstatus.PeerStatus, error) {
	s.mu.Lock()
	sps := make(map[string]Speaker, len(s.speakers))
	for name, r := range s.speakers {
		sps[name] = r.sp
	}
	s.mu.Unlock()
	out := make(map[string][]bgpstatus.PeerStatus, len(sps))
	var errs []error
	for name, sp := range sps {
		ps, err := sp.Peers(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("network %s: %w", name, err))
			continue
		}
		out[name] = ps
	}
	return out, errors.Join(errs...)
}
