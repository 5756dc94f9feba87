// Package netsync owns the node daemon's data-path loop. It reads what the
// API says (the networks and their subnets, the node's labels, the other
// nodes' tunnel endpoints, every pod's address) from the cache and what the
// node's state DB says (the pods plumbed here), has package translate (pure)
// turn them into the overlay package's Input and the underlay package's
// Input, and applies both, and runs one BGP speaker per
// BGP network of the node: on start, on every change of any of them, and
// periodically. It publishes this node's tunnel endpoint on its Node and
// answers the kernel's neighbour misses on the tunnel device from the same
// cache.
//
// # Design
//
// Level-triggered. Every add or delete, and every update that can change a
// pass's result (changesDataPath: not a Node's heartbeat, a Subnet's usage
// or an IPInstance's retention), only pokes a one-slot trigger; the loop then
// recomputes the whole input from the cache and the state DB and hands it to
// the data plane, which diffs it against the kernel. After a trigger the
// loop waits until triggers stop for a short quiet window (Options.Quiet),
// but no longer than Options.MaxDelay from the first, so a burst of events
// (pods added one after another, a node's status updates) costs one
// reconcile. A missed event is repaired by the next one (or by the periodic
// resync), and a restarted daemon converges the same way without history. A
// failed reconcile is retried with a capped backoff. With Options.Metrics,
// every pass's duration and each part that failed in it are recorded
// (metrics.go). WatchKernel also
// triggers on changes of the kernel's own links the data path depends on (a
// deleted tunnel or vlan-if, the uplink going down or changing addresses),
// so those are repaired at once rather than at the next resync.
//
// Four parts, in order: local pods, overlay, underlay, BGP. Each pass runs
// all of them; a failure of one is reported and retried but never keeps the
// others from running, and one malformed object (a bad annotation, a bad CIDR) is
// reported and skipped without cutting the rest off. The overlay waits for
// an Overlay network to exist.
//
// The local pods. Options.LocalPods (podnet.LocalPods) reconciles table
// 1000 from the endpoint store first in every pass; it skips the
// attachments whose ADD or DEL is in flight, and the endpoints it finds
// without a host veth are logged whenever that list changes.
//
// The underlay. The input holds the Underlay networks (VLAN and BGP mode,
// a BGP network with its peer addresses) whose domain holds this node (netmodel.Attached over the node's labels in the
// cache, as the manager labels nodes), their subnets, and in each subnet the
// addresses of the endpoint store that lie in its CIDR; it also lists every
// Underlay subnet of the cluster, which fixes table numbers and what the
// agent owns. A node relabelled out of a domain, or a deleted network, gives
// a smaller input, and Apply removes what is no longer in it. Because the
// agent owns proxy neighbours and enhanced addresses only inside subnets its
// input names, a subnet that disappears stays in Input.Cluster until an
// Apply without its network has succeeded. An input without networks that
// was applied is not applied again until it changes, which spares nodes
// outside every domain a full read of the kernel's state per pass. The
// uplink is Options.Uplink, else the tunnel's parent link; when it cannot be
// resolved, or this node's Node is not in the cache, the underlay is left as
// it is rather than removed. The uplink's addresses go in with their prefix
// lengths: they tell which BGP peer is on the uplink's network. Underlay
// subnets with natOutgoing (underlay.NATSources of that input) are handed
// to the overlay's NAT table (overlay.Input.UnderlayNAT), so they are
// masqueraded only while an Overlay network exists. Every Underlay subnet
// also goes into the overlay input (Underlays), so overlay pods reach
// underlay pods through the tunnel, and translate.NeighTable resolves underlay pods
// as it does overlay ones. Options.KubeProxyMark, kube-proxy's masquerade
// mark, is left to kube-proxy by the NAT table.
//
// BGP. Each BGP-mode Underlay network of the node gets one speaker (AS =
// netID, router id and IPv4 next hop = the node's first internal IPv4
// address), started when first needed and reconciled every pass with the
// network's peers and bgp.DesiredPrefixes of its local pods and subnets. Peer
// passwords are read from the Secrets that passwordSecretRef names with the
// live API client (no Secret is listed, watched or cached by an informer),
// at most once per Options.Resync per peer while it reads fine; a peer whose
// Secret or key is missing is left out and reported. A speaker whose network
// leaves the node withdraws its prefixes and deconfigures its peers before
// it stops. When the loop ends the speakers are stopped without
// deconfiguring (graceful restart), so peers keep the routes while the
// daemon restarts, and a speaker started for a network in which the
// endpoint store held pods at the daemon's start sets bgp.Config.Restarting.
// A change of the node's address replaces the speaker the same way.
//
// The fast path. With Options.FastPath, each pass also hands the forwarding
// fast path (package fastpath) its maps and devices: every subnet of the
// cluster with its natOutgoing, the host sides of the endpoint store's
// veths (Options.HostVeth names them), the overlay's tunnel, the tunnel's
// parent and the underlay's uplink. A pod plumbed between two passes takes
// the kernel's path until the next one, which its ADD triggers.
package netsync

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/internal/node/store"
)

// Dataplane is what the loop needs from the node's kernel.
type Dataplane interface {
	ResolveParent(spec overlay.ParentSpec) (overlay.Parent, error)
	Apply(ctx context.Context, in overlay.Input) (state.Plan, error)
	Answer(ctx context.Context, device string, lookup func(netip.Addr) (state.MAC, bool)) error
	Refresh(device string, lookup func(netip.Addr) (state.MAC, bool)) (int, error)
}

// Endpoints lists the attachments plumbed on this node.
type Endpoints interface {
	List() ([]store.Endpoint, error)
}

// Options configure a Syncer.
type Options struct {
	Node   string
	Port   int
	Parent overlay.ParentSpec
	// Resync is the period of the unconditional reconcile (default 30s).
	Resync time.Duration
	// Quiet is how long the loop waits after a trigger for the next one
	// before it reconciles (default 50ms); MaxDelay caps that wait, counted
	// from the first trigger (default 250ms).
	Quiet    time.Duration
	MaxDelay time.Duration
	Log      logr.Logger
	// Underlay applies the underlay data path; nil applies none.
	Underlay Underlay
	// Uplink is the underlay's NIC; empty means the tunnel's parent link.
	Uplink string
	// StartSpeaker starts the BGP speakers (default StartBGP).
	StartSpeaker StartSpeaker
	// KubeProxyMark is kube-proxy's masquerade mark (MarkOf of its
	// masqueradeBit): estuary's NAT leaves packets carrying it to
	// kube-proxy. 0 makes no such exception.
	KubeProxyMark uint32
	// HostNetns is the node's network namespace, whose links WatchKernel
	// watches; empty means the process's own.
	HostNetns string
	// FastPath is the forwarding fast path, synced every pass after the
	// overlay and the underlay; nil runs none. HostVeth names the host side
	// of an endpoint's veth for it.
	FastPath FastPath
	HostVeth func(store.Key) string
	// LocalPods reconciles the local-pods table from the endpoint store,
	// first in every pass; nil reconciles none (the pods' ADDs still write
	// their routes).
	LocalPods LocalPods
	// Metrics, if set, records every pass's duration and failed parts.
	Metrics *Metrics
	// Events, if set, records a BGP session going down and coming back as
	// Events on the Node (bgpevents.go).
	Events Events
}

// LocalPods is the routing plan's local-pods writer (podnet.LocalPods).
type LocalPods interface {
	Reconcile(ctx context.Context) (state.Plan, []store.Key, error)
}

// Defaults of Options.Quiet and Options.MaxDelay.
const (
	DefaultQuiet    = 50 * time.Millisecond
	DefaultMaxDelay = 250 * time.Millisecond
)

// Syncer runs the node's data-path loop.
type Syncer struct {
	opts    Options
	dp      Dataplane
	reader  client.Reader
	writer  client.Client
	eps     Endpoints
	trigger chan struct{}
	neigh   atomic.Pointer[map[netip.Addr]state.MAC]

	// The loop's goroutine only:
	device       string               // the device the answerer serves
	retired      []underlay.SubnetRef // the underlay subnets of the last Apply
	emptyApplied bool                 // the last Apply had no network and succeeded
	startPods    []netip.Addr         // the store's pods at the first pass
	started      bool                 // startPods is set
	bgpStarted   map[string]bool      // networks that had a speaker in this run
	passwords    map[string]password  // last password read per network, peer and key
	noVeth       string               // the endpoints without a host veth, as last logged
	sessions     map[peerKey]session  // the BGP sessions as last published

	mu       sync.Mutex // guards speakers
	speakers map[string]speakerState
}

// New returns a Syncer reading c (which must cache Nodes, Networks, Subnets
// and IPInstances and be started by the caller) and patching this node's
// annotations through w. It registers its triggers with c's informers.
func New(ctx context.Context, opts Options, dp Dataplane, c cache.Cache, w client.Client, eps Endpoints) (*Syncer, error) {
	s := &Syncer{opts: withDefaults(opts), dp: dp, reader: c, writer: w, eps: eps, trigger: make(chan struct{}, 1),
		bgpStarted: map[string]bool{}, passwords: map[string]password{}, speakers: map[string]speakerState{},
		sessions: map[peerKey]session{}}
	empty := map[netip.Addr]state.MAC{}
	s.neigh.Store(&empty)
	h := toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { s.Trigger() },
		UpdateFunc: func(old, updated any) {
			if changesDataPath(old, updated) {
				s.Trigger()
			}
		},
		DeleteFunc: func(any) { s.Trigger() },
	}
	for _, obj := range []client.Object{&corev1.Node{}, &estuaryv1.Network{}, &estuaryv1.Subnet{}, &estuaryv1.IPInstance{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, fmt.Errorf("informer for %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return nil, fmt.Errorf("watch %T: %w", obj, err)
		}
	}
	return s, nil
}

func withDefaults(opts Options) Options {
	if opts.Resync <= 0 {
		opts.Resync = 30 * time.Second
	}
	if opts.Quiet <= 0 {
		opts.Quiet = DefaultQuiet
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = DefaultMaxDelay
	}
	if opts.StartSpeaker == nil {
		opts.StartSpeaker = StartBGP
	}
	return opts
}

// Trigger asks for a reconcile soon. It never blocks.
func (s *Syncer) Trigger() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// Run reconciles until ctx ends, then stops the BGP speakers without
// deconfiguring their sessions. It returns nil on ctx's end: reconcile
// failures are logged and retried, never fatal, because the data path that
// is already in the kernel keeps working without the daemon.
func (s *Syncer) Run(ctx context.Context) error {
	s.loop(ctx, s.sync)
	s.stopSpeakers(ctx)
	return nil
}

// loop runs sync on start, after triggers (coalesced by settle), every
// Resync and on retry after a failure, until ctx ends.
func (s *Syncer) loop(ctx context.Context, sync func(context.Context) error) {
	tick := time.NewTicker(s.opts.Resync)
	defer tick.Stop()
	backoff := time.Duration(0)
	var retry <-chan time.Time
	s.Trigger()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.trigger:
			if !s.settle(ctx) {
				return
			}
		case <-tick.C:
		case <-retry:
		}
		retry = nil
		start := time.Now()
		err := sync(ctx)
		s.opts.Metrics.observe(start, err)
		if err != nil {
			backoff = min(max(2*backoff, 200*time.Millisecond), 30*time.Second)
			s.opts.Log.Error(err, "data-path reconcile failed; retrying", "in", backoff)
			retry = time.After(backoff)
			continue
		}
		backoff = 0
	}
}

// settle waits, after a trigger, until no other trigger has come for Quiet
// or MaxDelay has passed since the first, whichever is sooner. Triggers it
// absorbs are served by the reconcile that follows, which reads everything
// afresh. It returns false when ctx ends first.
func (s *Syncer) settle(ctx context.Context) bool {
	deadline := time.NewTimer(s.opts.MaxDelay)
	defer deadline.Stop()
	quiet := time.NewTimer(s.opts.Quiet)
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-deadline.C:
			return true
		case <-quiet.C:
			return true
		case <-s.trigger:
			quiet.Reset(s.opts.Quiet)
		}
	}
}

// Lookup answers a neighbour miss: the tunnel MAC of the node that owns ip.
func (s *Syncer) Lookup(ip netip.Addr) (state.MAC, bool) {
	m, ok := (*s.neigh.Load())[ip.Unmap()]
	return m, ok
}
