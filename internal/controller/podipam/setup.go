package podipam

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/workload"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// Options configure Setup.
type Options struct {
	// Workers is the number of pods served in parallel.
	Workers int
	// Metrics registers with this registry; nil means controller-runtime's.
	Metrics *Metrics
	// RetryExhausted is how long a pod whose network is full waits before
	// the next try (default 30s).
	RetryExhausted time.Duration
	// StatusInterval is the most often a Subnet or Network status is
	// written (default 2s).
	StatusInterval time.Duration
	// AuditInterval is how often the records are audited against memory
	// and every pod name holding an address is settled (default 2m).
	AuditInterval time.Duration
	// MaxRetainTTL is the longest ip-retain-ttl a pod may ask for
	// (netmodel.Bounds; 0: netmodel.DefaultMaxRetainTTL).
	MaxRetainTTL time.Duration
	// Defaults are the cluster's defaults for what a pod does not say.
	Defaults netmodel.Defaults
	// PodSelector, when set, limits the pods given addresses to those it
	// selects (the manager's --pod-label-selector).
	PodSelector labels.Selector
	// History configures the addresses' history (history.go); on unless
	// History.Off.
	History HistoryOptions
}

// Setup wires the pod, pool, network and subnet controllers, the rebuild,
// the audit and the status writer into mgr, all sharing one allocator. It
// returns the pod reconciler, whose Ready method backs the readiness probe.
func Setup(mgr ctrl.Manager, alloc *ipam.Allocator, opts Options) (*Reconciler, error) {
	c, err := setup(mgr, alloc, opts, nil)
	if err != nil {
		return nil, err
	}
	return c.pods, nil
}

// controllers are the two controllers setup wires around the holdings.
type controllers struct {
	pods  *Reconciler
	pools *poolReconciler
	// optional: the planner met a pod of an optional kind (optional.go).
	optional chan struct{}
	// history writes the addresses' history; nil when it is off.
	history *historyWriter
}

// setup is Setup; wrapLive, when set, wraps the live reader of every part
// but the topology (a test's faults).
func setup(mgr ctrl.Manager, alloc *ipam.Allocator, opts Options, wrapLive func(client.Reader) client.Reader) (*controllers, error) {
	opts = opts.withDefaults()
	live := mgr.GetAPIReader()
	if wrapLive != nil {
		live = wrapLive(live)
	}
	c := build(mgr.GetClient(), live, alloc, mgr.GetEventRecorder("estuary-manager"), NewTopology(mgr.GetClient(), mgr.GetAPIReader(), alloc), opts)
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &estuaryv1.IPInstance{}, indexRecordKey, func(o client.Object) []string {
		return []string{recordKey(o.(*estuaryv1.IPInstance))}
	})
	if err != nil {
		return nil, fmt.Errorf("index ipinstances by holder: %w", err)
	}
	audit, err := addRunnables(mgr, c, live, opts)
	if err != nil {
		return nil, err
	}
	if err := addTopology(mgr, c.pods.topo, c.pods.ready); err != nil {
		return nil, err
	}
	if err := addPodController(mgr, c.pods, audit, opts.Workers); err != nil {
		return nil, err
	}
	return c, addPoolController(mgr, c.pools, audit, opts.Workers)
}

func (o Options) withDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.RetryExhausted <= 0 {
		o.RetryExhausted = defaultRetryExhausted
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	if o.AuditInterval <= 0 {
		o.AuditInterval = defaultAuditInterval
	}
	return o
}

// build makes the parts and gives each what it owns or shares: the
// holdings, pending adoptions, queues and readiness are shared; the ledger
// is the one writer of records.
func build(cached client.Client, live client.Reader, alloc Allocator, events EventRecorder, topo *Topology, opts Options) *controllers {
	held, pending, queue, ready := newHoldings(), &pendingAdoptions{}, newQueues(), &readiness{}
	optional := make(chan struct{}, 1)
	var store recordStore = clientStore{cache: cached, live: live}
	var history *historyWriter
	if !opts.History.Off {
		history = newHistoryWriter(cached, live, opts.History, opts.Metrics.historyFailures)
		store = historyStore{recordStore: store, sink: history, now: time.Now}
	}
	led := &ledger{store: store, alloc: alloc, held: held, pending: pending, queue: queue, events: events, topo: topo}
	ret := &retainer{client: cached, live: live, defaults: opts.Defaults, held: held, ledger: led}
	pods := &Reconciler{
		client: cached, store: store, alloc: alloc, topo: topo, events: events, metrics: opts.Metrics,
		retryExhausted: opts.RetryExhausted, podSelector: opts.PodSelector,
		held: held, pending: pending, queue: queue, ready: ready, ledger: led, retention: ret,
		planner: &planner{client: cached, live: live, alloc: alloc, topo: topo, events: events,
			defaults: opts.Defaults, maxRetainTTL: opts.MaxRetainTTL, optional: optional},
		fixed: &fixedClaims{alloc: alloc, topo: topo, held: held, queue: queue, events: events, ledger: led},
	}
	pools := &poolReconciler{store: store, alloc: alloc, held: held, pending: pending, ready: ready, ledger: led, retention: ret}
	return &controllers{pods: pods, pools: pools, optional: optional, history: history}
}

// addRunnables adds the rebuild, the status writer, the optional watches
// and the audit, which it returns.
func addRunnables(mgr ctrl.Manager, c *controllers, live client.Reader, opts Options) (*auditor, error) {
	r := c.pods
	records := &recordReader{cache: mgr.GetClient(), live: live}
	if err := mgr.Add(&rebuilder{topo: r.topo, records: records, alloc: r.alloc, held: r.held, metrics: opts.Metrics, ready: r.ready}); err != nil {
		return nil, err
	}
	if err := mgr.Add(&StatusWriter{Client: mgr.GetClient(), Alloc: r.alloc, Topology: r.topo, Metrics: opts.Metrics, Ready: r.ready, Interval: opts.StatusInterval}); err != nil {
		return nil, err
	}
	if c.history != nil {
		if err := mgr.Add(c.history); err != nil {
			return nil, err
		}
	}
	err := mgr.Add(&optionalWatches{live: live, queue: r.queue, held: r.held, cache: mgr.GetCache(), mapper: mgr.GetRESTMapper(), poll: optionalPoll, seen: c.optional})
	if err != nil {
		return nil, err
	}
	audit := &auditor{records: records, alloc: r.alloc, held: r.held, pending: r.pending, metrics: opts.Metrics, ready: r.ready,
		interval: opts.AuditInterval, pods: make(chan event.TypedGenericEvent[types.NamespacedName]), pools: make(chan event.TypedGenericEvent[workload.Ref])}
	return audit, mgr.Add(audit)
}

// addTopology adds the network and subnet controllers.
func addTopology(mgr ctrl.Manager, topo *Topology, ready *readiness) error {
	err := ctrl.NewControllerManagedBy(mgr).Named("network").For(&estuaryv1.Network{}).
		Complete(&NetworkReconciler{Topology: topo})
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).Named("subnet").For(&estuaryv1.Subnet{}).
		Complete(&SubnetReconciler{Topology: topo, Ready: ready})
}

// addPodController adds the pod controller: its requests are pod names.
func addPodController(mgr ctrl.Manager, r *Reconciler, audit *auditor, workers int) error {
	byName := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, pod types.NamespacedName) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: pod}}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("pod-ipam").For(&corev1.Pod{}).
		Watches(&estuaryv1.IPInstance{}, handler.EnqueueRequestsFromMapFunc(instanceToPod)).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(setToPods(r.held, r.queue))).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(namespaceToPods(r.held))).
		WatchesRawSource(source.TypedChannel(audit.pods, byName)).
		WatchesRawSource(source.TypedChannel(r.queue.pods, byName)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(r)
}

// addPoolController adds the pool controller: its requests are workloads.
func addPoolController(mgr ctrl.Manager, p *poolReconciler, audit *auditor, workers int) error {
	same := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, pool workload.Ref) []workload.Ref {
		return []workload.Ref{pool}
	})
	return builder.TypedControllerManagedBy[workload.Ref](mgr).Named("pod-ipam-pool").
		WatchesRawSource(source.TypedKind(mgr.GetCache(), &estuaryv1.IPInstance{}, handler.TypedEnqueueRequestsFromMapFunc(instanceToPool))).
		WatchesRawSource(source.TypedKind(mgr.GetCache(), &corev1.Namespace{}, handler.TypedEnqueueRequestsFromMapFunc(p.namespaceToPools))).
		WatchesRawSource(source.TypedChannel(audit.pools, same)).
		WatchesRawSource(source.TypedChannel(p.ledger.queue.pools, same)).
		WithOptions(controller.TypedOptions[workload.Ref]{MaxConcurrentReconciles: workers}).
		Complete(p)
}

// instanceToPod: a record's change (or deletion) is a reason to look at the
// pod it names, e.g. to release records left behind while the manager was
// down.
func instanceToPod(_ context.Context, o client.Object) []reconcile.Request {
	ipi, ok := o.(*estuaryv1.IPInstance)
	if !ok || ipi.Spec.Binding.PodName == "" {
		return nil
	}
	b := &ipi.Spec.Binding
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.PodName}}}
}

// instanceToPool: a record's change (or deletion) is a reason to look at
// the workload it is kept or reserved for, e.g. to hold a reservation
// written by kubectl estuary.
func instanceToPool(_ context.Context, ipi *estuaryv1.IPInstance) []workload.Ref {
	b := &ipi.Spec.Binding
	if b.Owner.Kind != "" && b.Owner.Name != "" && (ipi.Spec.Reserved || workload.Pooled(ipi.Status.Phase, b.Owner.Kind)) {
		return []workload.Ref{{Namespace: b.Namespace, Kind: b.Owner.Kind, Name: b.Owner.Name}}
	}
	return nil
}

// setToPods: a StatefulSet's scale-down or deletion may release the addresses
// retained for its pods; a pool holding addresses of the set is queued with
// the pool controller.
func setToPods(held *holdings, queue *queues) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		kind := workload.KindStatefulSet
		if o.GetObjectKind().GroupVersionKind().Group == workload.GroupKruise {
			kind = workload.KindKruiseStatefulSet
		}
		for _, key := range held.ofSet(kind, o.GetNamespace(), o.GetName()) {
			if pod, ok := podOf(key); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: pod})
			} else {
				queue.kick(key) // a pool holding a reservation of the set's
			}
		}
		return reqs
	}
}

// namespaceToPods: a namespace being deleted releases every address held
// under its pod names.
func namespaceToPods(held *holdings) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		if o.GetDeletionTimestamp() == nil {
			return nil
		}
		var reqs []reconcile.Request
		for _, key := range held.keys() {
			if pod, ok := podOf(key); ok && pod.Namespace == o.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: pod})
			}
		}
		return reqs
	}
}

// namespaceToPools: a namespace being deleted releases every address its
// workloads keep.
func (p *poolReconciler) namespaceToPools(_ context.Context, ns *corev1.Namespace) []workload.Ref {
	if ns.DeletionTimestamp == nil {
		return nil
	}
	var pools []workload.Ref
	for _, key := range p.held.keys() {
		if pool, ok := poolOf(key); ok && pool.Namespace == ns.Name {
			pools = append(pools, pool)
		}
	}
	return pools
}
