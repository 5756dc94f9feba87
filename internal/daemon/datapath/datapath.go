// Package datapath owns the node daemon's data-path loop: when a pass runs,
// the one read of what a pass works from, and the parts that each bring one
// piece of the node in line with it. The parts, in the order a pass runs
// them, are the local pods (localpods.go), the publication of this node's
// tunnel endpoint (vtep.go), the overlay with its neighbour answerer
// (overlay.go), the underlay (underlay.go), the BGP speakers (bgp.go) and
// the fast path (fastpath.go); each file carries its part's design.
//
// # Design
//
// Level-triggered. Every add or delete of a cached Node, Network, Subnet or
// IPInstance, and every update that can change a pass's result
// (changesDataPath: not a Node's heartbeat, a Subnet's usage or an
// IPInstance's retention), only pokes a one-slot Trigger (PokeCluster);
// the loop then reads everything afresh and hands it to every part, which diffs it
// against what it owns. The Trigger is made before the loop and its parts,
// so whatever must ask for a pass (the CNI server after each ADD and DEL,
// a BGP session changing state, the kernel watch) is given it when it is
// built. After a trigger the loop waits until triggers stop for a short
// quiet window (Options.Quiet), but no longer than Options.MaxDelay from
// the first, so a burst of events (pods added one after another, a node's
// status updates) costs one pass. A pass the cluster's objects asked for
// also starts no sooner than Options.Pace times the last pass's duration
// after it: a pass reads the whole cluster, and without that pace the
// churn of other nodes' pods would run passes back to back. What this
// node asks for (Poke: its endpoints, links, BGP sessions) is never paced,
// and the cluster's pokes never extend its settle. A missed event is repaired by the next
// one (or by the periodic resync, Options.Resync), and a restarted daemon
// converges the same way without history. A failed pass is retried with a
// capped backoff. With Options.Metrics, every pass's duration and each part
// that failed in it are recorded (metrics.go), and with Options.Progress
// the time of the last good pass, which the daemon's readiness judges
// (progress.go). KernelWatch also pokes the
// trigger on changes of the kernel's own links the data path depends on (a
// deleted tunnel or vlan-if, the uplink going down or changing addresses),
// so those are repaired at once rather than at the next resync.
//
// One read per pass. The loop reads the networks, subnets and Nodes from
// the cache and other nodes' address records from theirs (remote.Record;
// the Nodes and records as the informers store them, not copied) and the attachments from the endpoint store
// into one Snapshot that every part receives; values one part hands a later
// one (the tunnel the VTEP part published, the overlay's input) travel in
// it too, never through a part reaching into another. The parts of
// Options.BeforeRead work from their own source and run first, so a failed
// read never keeps them from running; when the read fails, no other part
// runs and the pass fails as the read's. Each part's failure is reported
// and retried but never keeps the later parts from running, and the pass
// fails when any part failed; one malformed object (a bad annotation, a bad
// CIDR) is reported and skipped by the part without cutting the rest off.
// When the loop ends, the parts that hold something running beyond a pass
// (Stopper: the BGP speakers) are stopped.
package datapath

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/remote"
	"github.com/estuary-cni/estuary/internal/daemon/translate"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// Endpoints lists the attachments plumbed on this node.
type Endpoints interface {
	List() ([]endpointstore.Endpoint, error)
}

// Part is one job of a pass. It owns the state of its piece of the node.
type Part interface {
	// Name is the part's label in the loop's metrics (Parts).
	Name() string
	// Sync brings the part's piece of the node in line with snap, which
	// it must not modify beyond the values it hands later parts; snap is
	// nil for the parts of Options.BeforeRead.
	Sync(ctx context.Context, snap *Snapshot) error
}

// Stopper is a part that holds something running beyond a pass; the loop
// stops it when it ends.
type Stopper interface {
	Stop(ctx context.Context)
}

// Options configure a Syncer.
type Options struct {
	// Node is this node's name: the Node of Snapshot.Self.
	Node string
	// Resync is the period of the unconditional pass (DefaultResync).
	Resync time.Duration
	// Quiet is how long the loop waits after a trigger for the next one
	// before it runs a pass (DefaultQuiet); MaxDelay caps that wait,
	// counted from the first trigger (DefaultMaxDelay).
	Quiet    time.Duration
	MaxDelay time.Duration
	// Pace spaces the passes the cluster's objects ask for
	// (Trigger.PokeCluster): such a pass starts no sooner than Pace times
	// the last pass's duration after its end (DefaultPace), so that churn
	// elsewhere in the cluster costs at most about 1/(1+Pace) of a core
	// however often it comes. A Poke is never paced.
	Pace float64
	Log  logr.Logger
	// Metrics, if set, records every pass's duration and failed parts.
	Metrics *Metrics
	// Progress, if set, records every pass's start, end and error
	// (progress.go).
	Progress *Progress
	// Parent resolves the tunnel's parent link, at most once per pass, for
	// the parts that ask (Snapshot.Parent); nil resolves none.
	Parent func() (overlay.Parent, error)
	// BeforeRead are the parts that work from their own source, run first
	// in every pass with no snapshot, even when the read fails.
	BeforeRead []Part
	// Parts run after the read, in order, each with the pass's snapshot.
	Parts []Part
}

// Defaults of Options.Resync, Options.Quiet, Options.MaxDelay and
// Options.Pace.
const (
	DefaultResync   = 30 * time.Second
	DefaultQuiet    = 50 * time.Millisecond
	DefaultMaxDelay = 250 * time.Millisecond
	DefaultPace     = 1.0
)

// Syncer runs the node's data-path loop.
type Syncer struct {
	opts    Options
	reader  client.Reader
	records client.Reader
	eps     Endpoints
	trigger *Trigger
}

// New returns a Syncer reading c (which must cache Nodes, Networks,
// Subnets and IPInstances), records (the records bound to other nodes, as
// remote.Records: remote.NewCache) and eps, woken by t; the caller starts
// both caches. It registers t with their informers.
func New(ctx context.Context, opts Options, c, records cache.Cache, eps Endpoints, t *Trigger) (*Syncer, error) {
	if err := t.watch(ctx, c, records); err != nil {
		return nil, err
	}
	for _, p := range slices.Concat(opts.BeforeRead, opts.Parts) {
		if r, ok := p.(metricsRecorder); ok {
			r.recordTo(opts.Metrics)
		}
	}
	return &Syncer{opts: withDefaults(opts), reader: c, records: records, eps: eps, trigger: t}, nil
}

// metricsRecorder is a part that records metrics of its own in the loop's
// Metrics.
type metricsRecorder interface{ recordTo(m *Metrics) }

func withDefaults(opts Options) Options {
	if opts.Resync <= 0 {
		opts.Resync = DefaultResync
	}
	if opts.Quiet <= 0 {
		opts.Quiet = DefaultQuiet
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = DefaultMaxDelay
	}
	if opts.Pace <= 0 {
		opts.Pace = DefaultPace
	}
	if opts.Parent == nil {
		opts.Parent = func() (overlay.Parent, error) { return overlay.Parent{}, errors.New("no tunnel parent configured") }
	}
	return opts
}

// Run runs passes until ctx ends, then stops the parts that are Stoppers.
// It returns nil on ctx's end: failed passes are logged and retried, never
// fatal, because the data path that is already in the kernel keeps working
// without the daemon.
func (s *Syncer) Run(ctx context.Context) error {
	s.loop(ctx, s.pass)
	for _, p := range slices.Concat(s.opts.BeforeRead, s.opts.Parts) {
		if st, ok := p.(Stopper); ok {
			st.Stop(ctx)
		}
	}
	return nil
}

// loop runs pass on start, after triggers (coalesced by settle, the
// cluster's paced by pace), every Resync and on retry after a failure,
// until ctx ends.
func (s *Syncer) loop(ctx context.Context, pass func(context.Context) error) {
	tick := time.NewTicker(s.opts.Resync)
	defer tick.Stop()
	backoff := retryBackoff()
	var (
		retry <-chan time.Time
		next  time.Time // the soonest a paced pass may start
	)
	s.trigger.Poke()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.trigger.ch:
			if !s.settle(ctx) {
				return
			}
		case <-s.trigger.cluster:
			if !s.pace(ctx, next) || !s.settle(ctx) {
				return
			}
		case <-tick.C:
		case <-retry:
		}
		retry = nil
		start := time.Now()
		s.opts.Progress.begin(start)
		err := pass(ctx)
		end := time.Now()
		next = end.Add(time.Duration(s.opts.Pace * float64(end.Sub(start))))
		s.opts.Metrics.observe(start, end, err)
		s.opts.Progress.end(end, err)
		if err != nil {
			after := backoff.Step()
			s.opts.Log.Error(err, "data-path reconcile failed; retrying", "in", after)
			retry = time.After(after)
			continue
		}
		backoff = retryBackoff()
	}
}

// retryBackoff is the wait before a failed pass is retried: 200 ms,
// doubling to 30 s, each jittered by up to a fifth so that the nodes that
// failed together (an API server restart) do not retry in step.
func retryBackoff() wait.Backoff {
	return wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32,
		Cap: 30 * time.Second}
}

// pace waits, after a PokeCluster, until next or a Poke, whichever comes
// first. It returns false when ctx ends first.
func (s *Syncer) pace(ctx context.Context, next time.Time) bool {
	wait := time.Until(next)
	if wait <= 0 {
		return true
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	case <-s.trigger.ch:
	}
	return true
}

// settle waits, after a trigger, until no other Poke has come for Quiet or
// MaxDelay has passed since the first, whichever is sooner. Triggers it
// absorbs are served by the pass that follows, which reads everything
// afresh; a PokeCluster is absorbed without extending the wait, so that
// the cluster's churn never delays a pass this node asked for. It returns
// false when ctx ends first.
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
		case <-s.trigger.ch:
			quiet.Reset(s.opts.Quiet)
		case <-s.trigger.cluster:
		}
	}
}

// pass is one reconcile: the parts before the read, the read, then every
// other part in order, each reported on its own and marked with its part
// (metrics.go).
func (s *Syncer) pass(ctx context.Context) error {
	var errs []error
	for _, p := range s.opts.BeforeRead {
		errs = append(errs, inPart(p.Name(), p.Sync(ctx, nil)))
	}
	snap, err := s.read(ctx)
	if err != nil {
		return errors.Join(append(errs, inPart(PartRead, err))...)
	}
	for _, p := range s.opts.Parts {
		errs = append(errs, inPart(p.Name(), p.Sync(ctx, snap)))
	}
	return errors.Join(errs...)
}

// read lists everything the parts work from: the cache's objects and the
// endpoint store's attachments. The objects are the cache's own, not
// copies: every part only reads them, and nothing may write to them. The
// Nodes and other nodes' records (the cluster's size) are the informers' stored
// pointers, so a pass allocates one slice of pointers for them instead of
// a copy of every object; the networks and subnets, a few, are listed.
func (s *Syncer) read(ctx context.Context) (*Snapshot, error) {
	var (
		nets estuaryv1.NetworkList
		subs estuaryv1.SubnetList
	)
	shared := client.UnsafeDisableDeepCopy
	err := errors.Join(s.reader.List(ctx, &nets, shared), s.reader.List(ctx, &subs, shared))
	if err != nil {
		return nil, fmt.Errorf("read the cache: %w", err)
	}
	nodes, err := Stored[corev1.Node](ctx, s.reader, &corev1.NodeList{})
	if err != nil {
		return nil, fmt.Errorf("read the cache: %w", err)
	}
	records, err := Stored[remote.Record](ctx, s.records, &remote.RecordList{})
	if err != nil {
		return nil, fmt.Errorf("read other nodes' records: %w", err)
	}
	objs := translate.Objects{Networks: nets.Items, Subnets: subs.Items, Nodes: nodes, Records: records}
	eps, err := s.eps.List()
	if err != nil {
		return nil, fmt.Errorf("list local endpoints: %w", err)
	}
	return NewSnapshot(s.opts.Node, objs, eps, sync.OnceValues(s.opts.Parent)), nil
}

// Stored returns the objects of r's informer for T as the informer stores
// them, waiting (as a List does) until it has synced: the cache's own
// objects, read-only. A reader that is no informer cache (a fake client)
// is listed into list instead, and the pointers are to its items.
func Stored[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, r client.Reader, list client.ObjectList) ([]*T, error) {
	c, ok := r.(cache.Informers)
	if !ok {
		return listed[T, PT](ctx, r, list)
	}
	inf, err := c.GetInformer(ctx, PT(new(T)))
	if err != nil {
		return nil, fmt.Errorf("informer for %T: %w", PT(nil), err)
	}
	st, ok := inf.(interface{ GetStore() toolscache.Store })
	if !ok {
		return listed[T, PT](ctx, r, list)
	}
	return pointers[T, PT](st.GetStore().List()), nil
}

func listed[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, r client.Reader, list client.ObjectList) ([]*T, error) {
	if err := r.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list %T: %w", list, err)
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, fmt.Errorf("list %T: %w", list, err)
	}
	return pointers[T, PT](items), nil
}

// pointers are the objects of items that are PTs.
func pointers[T any, PT interface {
	*T
	client.Object
}, E any](items []E) []*T {
	out := make([]*T, 0, len(items))
	for _, o := range items {
		if p, ok := any(o).(PT); ok {
			out = append(out, (*T)(p))
		}
	}
	return out
}
