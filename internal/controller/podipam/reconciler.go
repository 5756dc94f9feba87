package podipam

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
	"github.com/estuary-cni/estuary/internal/netmodel"
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

// Reconciler gives pods their addresses and takes them back.
type Reconciler struct {
	Client    client.Client // cached reads of pods, namespaces, StatefulSets; all writes
	APIReader client.Reader // live reads, for the rebuild
	Alloc     Allocator
	Topology  *Topology
	Events    EventRecorder
	Metrics   *Metrics
	// RetryExhausted is how long a pod whose network is full waits before
	// the next try.
	RetryExhausted time.Duration
	// MaxRetainTTL is the longest ip-retain-ttl a pod may ask for (see
	// netmodel.Bounds; 0: its default).
	MaxRetainTTL time.Duration
	// Defaults are the cluster's defaults for what a pod does not say
	// (network type, IP family, StatefulSet retention), the same the
	// webhook applies.
	Defaults netmodel.Defaults
	// PodSelector, when set, is the manager's --pod-label-selector: a pod
	// it does not select is given nothing (see notServed).
	PodSelector labels.Selector

	held    *holdings
	pending pendingAdoptions
	ready   readiness
	kicks   *kicks
	// optional tells optionalWatches that a pod of an optional kind was
	// seen, so it looks for the kind now rather than at its next poll.
	optional chan struct{}
}

// Reconcile serves one pod name: it allocates, rebinds, retains or releases
// so that what is held for the name matches the pod (or its absence).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.ready.wait(ctx); err != nil {
		return ctrl.Result{}, err
	}
	if isPoolName(req.Name) {
		return r.reconcilePool(ctx, req.Namespace+"/"+req.Name)
	}
	key := ownerKey(req.Namespace, req.Name)
	pod := &corev1.Pod{}
	if err := r.Client.Get(ctx, req.NamespacedName, pod); apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return ctrl.Result{}, fmt.Errorf("get pod %s: %w", key, err)
	}
	held := r.adopt(ctx, key, r.held.get(key))
	if pod == nil || podFinished(pod) {
		return r.letGo(ctx, key, held)
	}
	if pod.Spec.NodeName == "" || pod.Spec.HostNetwork || r.notServed(ctx, pod, held) {
		return ctrl.Result{}, nil
	}
	if len(held) > 0 && held[0].podUID != string(pod.UID) {
		if set := statefulOwner(pod); set != nil && sameSet(held, set) {
			return r.rebindVerified(ctx, key, pod, held, set)
		}
		if err := r.replaced(ctx, key, held); err != nil {
			return ctrl.Result{}, err
		}
		held = nil
	}
	if len(held) > 0 {
		return r.complete(ctx, key, pod, held)
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
	owner, err := r.ownerOf(ctx, pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	if verifiedSet(pod, owner) == nil {
		r.Events.Eventf(pod, nil, corev1.EventTypeWarning, ReasonAllocationFailed, "Allocate",
			"pod %s names StatefulSet %s (uid %s) as its controller, which does not exist with that UID; the addresses kept for its name stay kept",
			key, set.name, set.uid)
		return ctrl.Result{RequeueAfter: r.RetryExhausted}, nil
	}
	keep, drop, count := r.keptFor(ctx, key, pod, held)
	if err := r.dropKept(ctx, key, keep, drop); err != nil {
		return ctrl.Result{}, err
	}
	if len(keep) == 0 {
		return r.allocate(ctx, key, pod)
	}
	if err := r.rebind(ctx, key, pod, keep, count); err != nil {
		return ctrl.Result{}, err
	}
	if len(keep) < count {
		return r.complete(ctx, key, pod, r.held.get(key))
	}
	return ctrl.Result{}, nil
}

// podFinished: the pod will never run again, so its addresses can go.
func podFinished(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// replaced lets go of what a pod that is gone held under a name a new pod
// now has: a StatefulSet's addresses of another StatefulSet are released,
// anything else goes as letGo says (kept for its workload, or released).
func (r *Reconciler) replaced(ctx context.Context, key string, held []holding) error {
	if held[0].set != nil {
		return r.release(ctx, key, held)
	}
	if _, err := r.letGo(ctx, key, held); err != nil {
		return err
	}
	if left := r.held.get(key); len(left) > 0 {
		return r.release(ctx, key, left)
	}
	return nil
}

// allocate gives a pod its addresses: the ones it already shows in its
// status, if their records were lost; else the ones it names; else those
// its workload keeps, then new ones; and records each as an IPInstance.
func (r *Reconciler) allocate(ctx context.Context, key string, pod *corev1.Pod) (ctrl.Result, error) {
	start := time.Now()
	res, err := r.allocateFor(ctx, key, pod)
	if err != nil {
		r.Metrics.observe(start, err)
		reason := ReasonAllocationFailed
		ref, denied := asRefusal(err)
		if denied {
			reason = ref.reason
		}
		r.Events.Eventf(pod, nil, corev1.EventTypeWarning, reason, "Allocate", "no address for pod %s: %v", key, err)
		if denied || errors.Is(err, ipam.ErrExhausted) {
			return ctrl.Result{RequeueAfter: r.RetryExhausted}, nil
		}
		return ctrl.Result{}, err
	}
	r.Metrics.observe(start, nil)
	return res, nil
}

func (r *Reconciler) allocateFor(ctx context.Context, key string, pod *corev1.Pod) (ctrl.Result, error) {
	if leases, ok := r.recover(key, pod); ok {
		_, f, err := r.plan(ctx, key, pod)
		var nsErr *namespaceError
		if errors.As(err, &nsErr) {
			r.abandon(ctx, key, leases, nil)
			return ctrl.Result{}, err
		}
		if err != nil {
			f = facts{}
			f.owner, _ = r.ownerOf(ctx, pod)
			f.set = verifiedSet(pod, f.owner)
		}
		return r.recordLeases(ctx, key, pod, leases, len(leases), nil, f)
	}
	req, f, err := r.plan(ctx, key, pod)
	if err != nil {
		return ctrl.Result{}, err
	}
	if handled, res, err := r.takeFromPredecessor(ctx, key, pod, f); handled || err != nil {
		return res, err
	}
	if f.fixed.Wants() {
		return r.allocateFixed(ctx, key, pod, f, req)
	}
	prior, rest, err := r.takePooled(ctx, key, pod, f, req)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(rest) == 0 {
		return ctrl.Result{}, nil
	}
	leases, err := r.Alloc.Allocate(narrow(req, rest))
	if err != nil {
		return ctrl.Result{}, err
	}
	return r.recordLeases(ctx, key, pod, leases, len(prior)+len(leases), prior, f)
}

// recordLeases records each lease as an IPInstance (one create each: the
// only API writes of an allocation) and holds them for the pod after the
// holdings it already has (prior); count is how many addresses the pod has
// in all.
//
// A create that fails is handled by what its failure says about the record:
// AlreadyExists means another owner holds the address (it is held for that
// owner and another is chosen); a refusal (invalid, forbidden) means nothing
// was stored, so the leases are released. Any other failure (a timeout, a
// lost connection) leaves the outcome unknown: the API server may have
// stored the record. Then no address is freed: every lease stays held and
// the next pass confirms each record or creates it (complete).
func (r *Reconciler) recordLeases(ctx context.Context, key string, pod *corev1.Pod, leases []ipam.Lease, count int, prior []holding, f facts) (ctrl.Result, error) {
	hds := make([]holding, len(leases))
	for i, l := range leases {
		hds[i] = holding{lease: l, name: estuaryv1.InstanceName(l.Addr), podUID: string(pod.UID), node: pod.Spec.NodeName,
			phase: estuaryv1.IPInstanceBound, set: f.set, count: count, pod: pod.Name, owner: f.owner, retain: f.retain, mac: f.mac}
	}
	// Every address of a pod records the same MAC: the one its other
	// addresses have (handed over already, or recorded by an earlier
	// pass), else the stable MAC when its addresses may be kept (mac.go).
	if f.mac == "" && len(hds) > 0 {
		mac := ""
		if len(prior) > 0 {
			mac = prior[0].mac
		} else if f.keepsMAC() {
			mac = podMAC("", hds)
		}
		for i := range hds {
			hds[i].mac = mac
		}
	}
	for i, hd := range hds {
		err := r.Client.Create(ctx, r.instance(pod, hd))
		switch {
		case err == nil:
			hds[i].recorded = time.Now()
			continue
		case apierrors.IsAlreadyExists(err):
			r.held.set(key, prior)
			r.abandon(ctx, key, leases, hds[:i])
			return ctrl.Result{RequeueAfter: conflictRetry}, r.adoptConflict(ctx, pod, hd.lease)
		case refused(err):
			r.held.set(key, prior)
			r.abandon(ctx, key, leases, hds[:i])
			return ctrl.Result{}, fmt.Errorf("record %s for pod %s: %w", hd.lease.Addr, key, err)
		default:
			r.held.set(key, append(prior, hds...))
			return ctrl.Result{}, fmt.Errorf("record %s for pod %s: outcome unknown, its addresses stay held until their records are confirmed: %w", hd.lease.Addr, key, err)
		}
	}
	r.held.set(key, append(prior, hds...))
	log.FromContext(ctx).V(1).Info("allocated", "pod", key, "addresses", addrs(hds))
	return ctrl.Result{}, nil
}

// refused: the API server answered and stored nothing.
func refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err) || apierrors.IsUnauthorized(err)
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
		l, ok := r.Topology.leaseFor(a)
		if !ok || r.Alloc.Assign(l.Subnet, a, key) != nil {
			break
		}
		leases = append(leases, l)
	}
	if len(leases) > 0 && len(leases) == len(pod.Status.PodIPs) {
		return leases, true
	}
	for _, l := range leases {
		_ = r.Alloc.Release(l.Subnet, l.Addr, key)
	}
	return nil, false
}

// abandon undoes a partial allocation: the records created so far are
// deleted and every lease is released in memory.
func (r *Reconciler) abandon(ctx context.Context, key string, leases []ipam.Lease, created []holding) {
	for _, hd := range created {
		err := r.deleteRecord(ctx, key, hd)
		if he, ok := asHeldElsewhere(err); ok {
			err = r.giveTo(ctx, key, hd, he.record)
		}
		if err != nil {
			log.FromContext(ctx).Error(err, "undo partial allocation", "pod", key, "address", hd.lease.Addr)
			r.held.add(key, hd)
		}
	}
	for _, l := range leases {
		if r.isHeld(key, l) {
			continue
		}
		_ = r.Alloc.Release(l.Subnet, l.Addr, key)
	}
}

func (r *Reconciler) isHeld(key string, l ipam.Lease) bool {
	for _, hd := range r.held.get(key) {
		if hd.lease.Subnet == l.Subnet && hd.lease.Addr == l.Addr {
			return true
		}
	}
	return false
}

// adoptConflict handles an address the allocator thought free but the API
// already records: it marks the address held by the record's owner so it is
// never handed out twice, and reports the disagreement on the pod.
func (r *Reconciler) adoptConflict(ctx context.Context, pod *corev1.Pod, l ipam.Lease) error {
	existing := &estuaryv1.IPInstance{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: estuaryv1.InstanceName(l.Addr)}, existing); err != nil {
		return fmt.Errorf("address %s in subnet %s is already recorded; read the record: %w", l.Addr, l.Subnet, err)
	}
	rec, err := record(existing)
	if err != nil {
		return err
	}
	if err := r.Alloc.Assign(rec.Subnet, rec.Addr, rec.Owner); err != nil && !errors.Is(err, ipam.ErrInUse) {
		return fmt.Errorf("hold recorded address %s for %s: %w", rec.Addr, rec.Owner, err)
	}
	r.Events.Eventf(pod, existing, corev1.EventTypeWarning, "AddressConflict", "Allocate",
		"address %s in subnet %s is already recorded for %s; it is now held for that owner and another address will be chosen", l.Addr, l.Subnet, rec.Owner)
	return nil
}

func addrs(hs []holding) []string {
	out := make([]string, len(hs))
	for i, hd := range hs {
		out[i] = hd.lease.Addr.String()
	}
	return out
}
