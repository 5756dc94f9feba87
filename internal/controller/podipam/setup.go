package podipam

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
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
}

// Setup wires the pod, network and subnet controllers, the rebuild and the
// status writer into mgr, all sharing one allocator. It returns the pod
// reconciler, whose Ready method backs the readiness probe.
func Setup(mgr ctrl.Manager, alloc *ipam.Allocator, opts Options) (*Reconciler, error) {
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.RetryExhausted <= 0 {
		opts.RetryExhausted = defaultRetryExhausted
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	if opts.AuditInterval <= 0 {
		opts.AuditInterval = defaultAuditInterval
	}
	topo := NewTopology(mgr.GetClient(), mgr.GetAPIReader(), alloc)
	r := &Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Alloc: alloc, Topology: topo,
		Events: mgr.GetEventRecorder("estuary-manager"), Metrics: opts.Metrics, held: newHoldings(),
		RetryExhausted: opts.RetryExhausted, MaxRetainTTL: opts.MaxRetainTTL, Defaults: opts.Defaults, kicks: newKicks(), optional: make(chan struct{}, 1), PodSelector: opts.PodSelector,
	}
	err := mgr.GetFieldIndexer().IndexField(context.Background(), &estuaryv1.IPInstance{}, indexRecordKey, func(o client.Object) []string {
		return []string{recordKey(o.(*estuaryv1.IPInstance))}
	})
	if err != nil {
		return nil, fmt.Errorf("index ipinstances by holder: %w", err)
	}
	if err := mgr.Add(r); err != nil {
		return nil, err
	}
	if err := mgr.Add(&StatusWriter{Client: mgr.GetClient(), Alloc: alloc, Topology: topo, Metrics: opts.Metrics, Ready: &r.ready, Interval: opts.StatusInterval}); err != nil {
		return nil, err
	}
	if err := mgr.Add(&optionalWatches{r: r, cache: mgr.GetCache(), mapper: mgr.GetRESTMapper(), poll: optionalPoll, seen: r.optional}); err != nil {
		return nil, err
	}
	audit := &auditor{r: r, interval: opts.AuditInterval, pods: make(chan event.GenericEvent)}
	if err := mgr.Add(audit); err != nil {
		return nil, err
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("network").For(&estuaryv1.Network{}).
		Complete(&NetworkReconciler{Topology: topo})
	if err != nil {
		return nil, err
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("subnet").For(&estuaryv1.Subnet{}).
		Complete(&SubnetReconciler{Topology: topo, Ready: &r.ready})
	if err != nil {
		return nil, err
	}
	err = ctrl.NewControllerManagedBy(mgr).Named("pod-ipam").For(&corev1.Pod{}).
		Watches(&estuaryv1.IPInstance{}, handler.EnqueueRequestsFromMapFunc(instanceToPod)).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.setToPods)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.namespaceToKeys)).
		WatchesRawSource(source.Channel(audit.pods, &handler.EnqueueRequestForObject{})).
		WatchesRawSource(source.Channel(r.kicks.ch, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.Workers}).
		Complete(r)
	return r, err
}

// instanceToPod: a record's change (or deletion) is a reason to look at the
// pod it names, e.g. to release records left behind while the manager was
// down, and at the workload it is kept or reserved for, e.g. to hold a
// reservation written by kubectl estuary.
func instanceToPod(_ context.Context, o client.Object) []reconcile.Request {
	ipi, ok := o.(*estuaryv1.IPInstance)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	b := &ipi.Spec.Binding
	if b.PodName != "" {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.PodName}})
	}
	if b.Owner.Kind != "" && b.Owner.Name != "" && (ipi.Spec.Reserved || workload.Pooled(ipi.Status.Phase, b.Owner.Kind)) {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Owner.Kind + "/" + b.Owner.Name}})
	}
	return reqs
}

// setToPods: a StatefulSet's scale-down or deletion may release the addresses
// retained for its pods.
func (r *Reconciler) setToPods(_ context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	kind := workload.KindStatefulSet
	if o.GetObjectKind().GroupVersionKind().Group == workload.GroupKruise {
		kind = workload.KindKruiseStatefulSet
	}
	for _, key := range r.held.ofSet(kind, o.GetNamespace(), o.GetName()) {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: key[len(o.GetNamespace())+1:]}})
	}
	return reqs
}

// namespaceToKeys: a namespace being deleted releases every address held
// under its pod names and workloads.
func (r *Reconciler) namespaceToKeys(_ context.Context, o client.Object) []reconcile.Request {
	if o.GetDeletionTimestamp() == nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, key := range r.held.keys() {
		if ns, name, _ := strings.Cut(key, "/"); ns == o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	return reqs
}
