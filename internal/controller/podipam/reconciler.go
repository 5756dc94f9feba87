package podipam

// The pod controller. It is queued with a pod's name (types.NamespacedName:
// a pod event, a record naming the pod, a StatefulSet or Namespace change,
// the audit, a waiting pod woken) and serves that name alone: it allocates,
// rebinds, retains or releases so that what is held for the name matches
// the pod, or its absence. A pod's allocation reads top to bottom through
// the files: this one (Reconcile, allocate), selection.go (what the pod
// asks for, admitted), the ways it may be served from what is held already
// (vm.go: a machine's newer pod; fixed.go: named addresses; pool.go: its
// workload's pool), the allocator, then ledger.go (the records written and
// held). A pod that holds addresses already is completed (complete.go) or
// takes back what its StatefulSet kept (takeback.go); a pod that is gone
// lets go as the retention rules say (retention.go). The pool controller
// (poolreconciler.go) settles what workloads keep.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// Allocator is what the controller needs of pkg/ipam.
type Allocator interface {
	subnetView
	AddSubnet(cfg ipam.SubnetConfig, records ...ipam.Record) error
	UpdateSubnet(cfg ipam.SubnetConfig) error
	RemoveSubnet(name string) error
	Allocate(req ipam.Request) ([]ipam.Lease, error)
	Assign(subnet string, addr netip.Addr, owner string) error
	Release(subnet string, addr netip.Addr, owner string) error
	Transfer(subnet string, addr netip.Addr, from, to string, st ipam.State) error
	Lookup(subnet string, addr netip.Addr) (ipam.Record, error)
	Retain(subnet string, addr netip.Addr, owner string) error
	Rebuild(records []ipam.Record) error
	Records() []ipam.Record
	SetCursor(subnet string, addr netip.Addr) error
	Cursor(subnet string) (netip.Addr, error)
	Stats(subnet string) (ipam.Stats, error)
	NetworkStats(network string, family family.Family) (ipam.Stats, error)
}

// EventRecorder records events about pods.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// defaultRetryExhausted is how long a pod whose network is full waits before
// the next try.
const defaultRetryExhausted = 30 * time.Second

// conflictRetry is how soon a pod whose address turned out to be recorded
// already is tried again with another address.
const conflictRetry = 100 * time.Millisecond

// Reconciler is the pod controller: it gives pods their addresses and
// takes them back.
type Reconciler struct {
	client  client.Client // cached reads of pods and StatefulSets
	store   recordStore   // the records a pass confirms
	alloc   Allocator
	topo    *Topology
	events  EventRecorder
	metrics *Metrics
	// retryExhausted is how long a pod whose network is full waits before
	// the next try.
	retryExhausted time.Duration
	// podSelector, when set, is the manager's --pod-label-selector: a pod
	// it does not select is given nothing (see notServed).
	podSelector labels.Selector

	held      *holdings
	pending   *pendingAdoptions
	queue     *queues
	ready     *readiness
	planner   *planner
	ledger    *ledger
	retention *retainer
	fixed     *fixedClaims
}

// Reconcile serves one pod name: it allocates, rebinds, retains or releases
// so that what is held for the name matches the pod (or its absence).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.ready.wait(ctx); err != nil {
		return ctrl.Result{}, err
	}
	key := podKey(req.NamespacedName)
	pod := &corev1.Pod{}
	if err := r.client.Get(ctx, req.NamespacedName, pod); apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("get pod %s: %w", key, err)
	}
	held := r.adopt(ctx, key, r.held.get(key))
	if pod != nil && !podFinished(pod) {
		return r.serve(ctx, key, pod, held)
	}
	return r.retention.letGo(ctx, key, held)
}

// podFinished: the pod will never run again, so its addresses can go.
func podFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// adopt holds, for the pod name being reconciled, the records the audit
// found that this manager did not hold. A record whose address the
// allocator holds for another pod name is left for a later audit: that
// name's own reconcile finds the record is not its and gives the address up.
func (r *Reconciler) adopt(ctx context.Context, key string, held []holding) []holding {
	for _, hd := range r.pending.take(key) {
		if holdsName(held, hd.name) {
			continue
		}
		err := r.alloc.Assign(hd.lease.Subnet, hd.lease.Addr, key)
		if err == nil && hd.phase == estuaryv1.IPInstanceRetained {
			err = r.alloc.Retain(hd.lease.Subnet, hd.lease.Addr, key)
		}
		if err != nil {
			if !errors.Is(err, ipam.ErrInUse) {
				log.FromContext(ctx).Error(err, "adopt a record", "pod", key, "address", hd.lease.Addr)
			}
			continue
		}
		log.FromContext(ctx).Info("adopted a record this manager did not hold", "pod", key, "address", hd.lease.Addr)
		held = append(held, hd)
	}
	r.held.set(key, held)
	return held
}

// serve serves a live pod that holds held: a scheduled pod holding
// nothing is allocated its addresses; one holding its own is completed
// (complete.go); a new pod under a name that holds a predecessor's takes
// them over.
func (r *Reconciler) serve(ctx context.Context, key string, pod *corev1.Pod, held []holding) (ctrl.Result, error) {
	if pod.Spec.NodeName == "" || pod.Spec.HostNetwork || r.notServed(ctx, pod, held) {
		return ctrl.Result{}, nil
	}
	if len(held) == 0 {
		return r.allocate(ctx, key, pod)
	}
	if held[0].podUID == string(pod.UID) {
		return r.complete(ctx, key, pod, held)
	}
	return r.takeOver(ctx, key, pod, held)
}

// notServed reports whether pod is outside the manager's pod selector and
// must get nothing: no new address and no address kept for its name (a
// StatefulSet's). What it already holds under its own UID, given before the
// selector changed, stays its own until it goes, and is settled as any
// pod's. It records ReasonNotSelected on the pod (the recorder folds
// repeats into one event series).
func (r *Reconciler) notServed(ctx context.Context, pod *corev1.Pod, held []holding) bool {
	if r.podSelector == nil || r.podSelector.Matches(labels.Set(pod.Labels)) {
		return false
	}
	if len(held) > 0 && held[0].podUID == string(pod.UID) {
		return false
	}
	log.FromContext(ctx).V(1).Info("pod not selected by --pod-label-selector", "pod", pod.Namespace+"/"+pod.Name)
	r.events.Eventf(pod, nil, corev1.EventTypeNormal, ReasonNotSelected, "Allocate",
		"estuary gives pod %s/%s no address: its labels do not match the manager's --pod-label-selector %q",
		pod.Namespace, pod.Name, r.podSelector.String())
	return true
}

// allocate gives a pod its addresses: the ones it already shows in its
// status, if their records were lost; else the ones it names; else those
// its workload keeps, then new ones; and records each as an IPInstance.
func (r *Reconciler) allocate(ctx context.Context, key string, pod *corev1.Pod) (ctrl.Result, error) {
	start := time.Now()
	res, err := r.allocateFor(ctx, key, pod)
	if err != nil {
		r.metrics.observe(start, err)
		reason := ReasonAllocationFailed
		var ref *refusal
		denied := errors.As(err, &ref)
		if denied {
			reason = ref.reason
		}
		r.events.Eventf(pod, nil, corev1.EventTypeWarning, reason, "Allocate", "no address for pod %s: %v", key, err)
		if denied || errors.Is(err, ipam.ErrExhausted) {
			return ctrl.Result{RequeueAfter: r.retryExhausted}, nil
		}
		return ctrl.Result{}, err
	}
	r.metrics.observe(start, nil)
	return res, nil
}

func (r *Reconciler) allocateFor(ctx context.Context, key string, pod *corev1.Pod) (ctrl.Result, error) {
	leases, recovered := r.recover(key, pod)
	if !recovered {
		return r.allocateNew(ctx, key, pod)
	}
	return r.recordRecovered(ctx, key, pod, leases)
}

// allocateNew gives a pod that reports no address of its own what it asks
// for: what an older pod of its machine holds (vm.go), or the addresses it
// names (fixed.go), or what its workload keeps (pool.go) and new ones for
// the families still missing; then records them (ledger.go).
func (r *Reconciler) allocateNew(ctx context.Context, key string, pod *corev1.Pod) (ctrl.Result, error) {
	req, f, err := r.planner.plan(ctx, key, pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	if handled, res, err := r.takeFromPredecessor(ctx, key, pod, f); handled || err != nil {
		return res, err
	}
	if f.fixed.Wants() {
		return r.fixed.allocateFixed(ctx, key, pod, f, req)
	}
	prior, rest, err := r.takePooled(ctx, key, pod, f, req)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(rest) == 0 {
		return ctrl.Result{}, nil
	}
	leases, err := r.alloc.Allocate(narrow(req, rest))
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.ledger.recordLeases(ctx, key, pod, leases, len(prior)+len(leases), prior, f)
}

// recover reassigns the addresses a pod reports in its status, if every one
// of them lies in a known subnet and is free. It is all or nothing.
func (r *Reconciler) recover(key string, pod *corev1.Pod) ([]ipam.Lease, bool) {
	var leases []ipam.Lease
	for _, pip := range pod.Status.PodIPs {
		a, err := netip.ParseAddr(pip.IP)
		if err != nil {
			break
		}
		l, ok := r.topo.leaseFor(a)
		if !ok || r.alloc.Assign(l.Subnet, a, key) != nil {
			break
		}
		leases = append(leases, l)
	}
	if len(leases) > 0 && len(leases) == len(pod.Status.PodIPs) {
		return leases, true
	}
	for _, l := range leases {
		_ = r.alloc.Release(l.Subnet, l.Addr, key)
	}
	return nil, false
}

// recordRecovered records the addresses a pod reports in its status
// (recover): with the facts its plan gives, or, when its request cannot be
// worked out, with its verified owner alone. A namespace that cannot be
// read gives them back: its annotations decide what the pod may have.
func (r *Reconciler) recordRecovered(ctx context.Context, key string, pod *corev1.Pod, leases []ipam.Lease) (ctrl.Result, error) {
	_, f, err := r.planner.plan(ctx, key, pod)
	var nsErr *namespaceError
	if errors.As(err, &nsErr) {
		r.ledger.abandon(ctx, key, leases, nil)
		return ctrl.Result{}, err
	}
	if err != nil {
		f = facts{}
		f.owner, _ = r.planner.ownerOf(ctx, pod)
		f.set = verifiedSet(pod, f.owner)
	}
	return r.ledger.recordLeases(ctx, key, pod, leases, len(leases), nil, f)
}

// takeOver serves a new pod under a name that holds a gone pod's
// addresses: a StatefulSet's pod takes back what its set kept for the
// name (rebindVerified); any other pod has them let go (replaced) and is
// allocated afresh.
func (r *Reconciler) takeOver(ctx context.Context, key string, pod *corev1.Pod, held []holding) (ctrl.Result, error) {
	if set := statefulOwner(pod); set != nil && sameSet(held, set) {
		return r.rebindVerified(ctx, key, pod, held, set)
	}
	if err := r.replaced(ctx, key, held); err != nil {
		return ctrl.Result{}, err
	}
	return r.allocate(ctx, key, pod)
}

// rebindVerified rebinds the addresses kept for a StatefulSet pod's name
// to pod if the StatefulSet it names exists with the UID it names. A pod
// whose reference does not check out (a forged one) gets nothing, and the
// addresses stay kept for the StatefulSet's own pod: it is refused and
// looked at again later. The pod takes back what it asks for now
// (keptFor): the rest is let go, and a family it asks for that nothing
// kept is allocated in the same pass, so the records never tell its node
// that it has fewer addresses than it asks for.
func (r *Reconciler) rebindVerified(ctx context.Context, key string, pod *corev1.Pod, held []holding, set *setRef) (ctrl.Result, error) {
	owner, err := r.planner.ownerOf(ctx, pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	if verifiedSet(pod, owner) == nil {
		r.events.Eventf(pod, nil, corev1.EventTypeWarning, ReasonAllocationFailed, "Allocate",
			"pod %s names StatefulSet %s (uid %s) as its controller, which does not exist with that UID; the addresses kept for its name stay kept",
			key, set.name, set.uid)
		return ctrl.Result{RequeueAfter: r.retryExhausted}, nil
	}
	keep, drop, count := r.keptFor(ctx, key, pod, held)
	if err := r.dropKept(ctx, key, keep, drop); err != nil {
		return ctrl.Result{}, err
	}
	if len(keep) == 0 {
		return r.allocate(ctx, key, pod)
	}
	if err := r.ledger.rebind(ctx, key, pod, keep, count); err != nil {
		return ctrl.Result{}, err
	}
	if len(keep) < count {
		return r.complete(ctx, key, pod, r.held.get(key))
	}
	return ctrl.Result{}, nil
}

// replaced lets go of what a pod that is gone held under a name a new pod
// now has: a StatefulSet's addresses of another StatefulSet are released,
// anything else goes as letGo says (kept for its workload, or released).
func (r *Reconciler) replaced(ctx context.Context, key string, held []holding) error {
	if held[0].set != nil {
		return r.ledger.release(ctx, key, held)
	}
	if _, err := r.retention.letGo(ctx, key, held); err != nil {
		return err
	}
	if left := r.held.get(key); len(left) > 0 {
		return r.ledger.release(ctx, key, left)
	}
	return nil
}
