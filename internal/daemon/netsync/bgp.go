package netsync

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/bgp"
	"github.com/estuary-cni/estuary/internal/daemon/translate"
)

// Speaker is a running BGP speaker's lifecycle; *bgp.Speaker implements it.
type Speaker interface {
	Reconcile(ctx context.Context, peers []bgp.Peer, prefixes []netip.Prefix) error
	Peers(ctx context.Context) ([]bgp.PeerStatus, error)
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

// speakerState is one speaker the loop started.
type speakerState struct {
	sp  Speaker
	cfg bgp.Config
}

// syncBGP makes the running speakers those of the node's BGP networks:
// it starts a missing one, reconciles every one with the peers and
// prefixes of this pass, and withdraws and stops the speaker of a network
// that is gone from the node; then it publishes the speakers' session
// states on the Node (publishBGPPeers). Each network's failure is reported;
// none stops the others. Every session state change triggers a pass.
func (s *Syncer) syncBGP(ctx context.Context, node *corev1.Node, objs translate.Objects, pods []netip.Addr) error {
	if node == nil {
		s.mu.Lock()
		n := len(s.speakers)
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		return fmt.Errorf("bgp: node %s is not in the cache; speakers left as they are", s.opts.Node)
	}
	nets, err := translate.BuildBGPNetworks(node, objs, pods)
	if err != nil {
		s.opts.Log.Error(err, "objects skipped while computing the bgp networks")
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
func (s *Syncer) syncSpeaker(ctx context.Context, node *corev1.Node, n translate.BGPNetwork) error {
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
			s.opts.Log.Error(err, "stop bgp speaker", "network", n.Name)
		}
		cfg.Restarting = true
	} else {
		cfg.Restarting = !s.bgpStarted[n.Name] && s.hadPodsAtStart(slices.Concat(n.Subnets, n.Global))
	}
	cfg.Logger = s.opts.Log.WithName("bgp").WithValues("network", n.Name)
	// A session state change is published on the Node by the next pass.
	cfg.OnPeerChange = s.Trigger
	sp, err := s.opts.StartSpeaker(ctx, cfg, peers, n.Prefixes)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		delete(s.speakers, n.Name)
		return errors.Join(peerErr, fmt.Errorf("network %s: start bgp speaker (AS %d): %w", n.Name, cfg.LocalASN, err))
	}
	s.speakers[n.Name] = speakerState{sp: sp, cfg: cfg}
	s.bgpStarted[n.Name] = true
	s.opts.Log.Info("bgp speaker started", "network", n.Name, "as", cfg.LocalASN, "routerID", cfg.RouterID,
		"peers", len(peers), "prefixes", len(n.Prefixes), "restarting", cfg.Restarting)
	return peerErr
}

// removeSpeaker withdraws a gone network's prefixes, deconfigures its
// peers (they forget the node's routes at once) and stops its speaker.
func (s *Syncer) removeSpeaker(ctx context.Context, name string) error {
	s.mu.Lock()
	r := s.speakers[name]
	delete(s.speakers, name)
	s.mu.Unlock()
	err := errors.Join(r.sp.Reconcile(ctx, nil, nil), r.sp.Stop(ctx))
	s.opts.Log.Info("bgp speaker stopped: network gone from the node", "network", name)
	if err != nil {
		return fmt.Errorf("network %s: stop bgp speaker: %w", name, err)
	}
	return nil
}

// stopSpeakers stops every speaker without deconfiguring its sessions, so
// that peers keep the node's routes while the daemon restarts.
func (s *Syncer) stopSpeakers(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopTimeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, r := range s.speakers {
		if err := r.sp.Stop(ctx); err != nil {
			s.opts.Log.Error(err, "stop bgp speaker", "network", name)
		}
		delete(s.speakers, name)
	}
}

// hadPodsAtStart reports whether the endpoint store held, at the daemon's
// start, a pod inside one of subnets: its kernel routes are then in place
// and the peers may still hold an earlier speaker's routes.
func (s *Syncer) hadPodsAtStart(subnets []netip.Prefix) bool {
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
func (s *Syncer) resolvePeers(ctx context.Context, n translate.BGPNetwork) ([]bgp.Peer, error) {
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

// password reads a peer's password, again once Options.Resync has passed
// since the last read (so a rotated password is picked up); ok is false
// when the peer must be left out.
func (s *Syncer) password(ctx context.Context, network string, peer netip.Addr,
	ref *estuaryv1.SecretKeyReference) (pw string, ok bool, err error) {
	key := strings.Join([]string{network, peer.String(), ref.Namespace, ref.Name, ref.Key}, "/")
	last, known := s.passwords[key]
	if known && time.Since(last.read) < s.opts.Resync {
		return last.value, true, nil
	}
	var sec corev1.Secret
	getErr := s.writer.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &sec)
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
func (s *Syncer) BGPPeers(ctx context.Context) (map[string][]bgp.PeerStatus, error) {
	s.mu.Lock()
	sps := make(map[string]Speaker, len(s.speakers))
	for name, r := range s.speakers {
		sps[name] = r.sp
	}
	s.mu.Unlock()
	out := make(map[string][]bgp.PeerStatus, len(sps))
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
