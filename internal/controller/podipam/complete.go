package podipam

// A live pod that already holds addresses is brought in line with the
// records on every pass, so that an interrupted or uncertain allocation
// ends in exactly one recorded address per family the pod asks for:
//
//   - confirm: every held address must have a record that binds this pod
//     (Bound, its name and UID, its address count). A record missing from
//     the cache is created again; a create that finds the record already
//     there reads it live. A record still held under the pod's name, or
//     still kept by its workload (a write whose answer was lost), is
//     written to bind the pod, conditionally (records.go). A record that
//     another holder has means the address is that holder's: memory
//     follows the record (giveTo) and the pod drops it (a split brain, or
//     an unknown outcome that turned out to be someone else's).
//   - one per family: a pod holding two addresses of one family keeps the
//     one it uses (status.podIPs) or else the lowest, and releases the rest.
//     The choice depends only on the pod and the addresses, so two managers
//     that both see the pair (a split brain) keep the same one. While the
//     pod reports no address, nothing is released: its node may have set
//     up either one (the node takes the lowest it sees of a family, see
//     package ipwait), and the kubelet's report says which.
//   - complete: a pod whose records say it has more addresses than it holds
//     (a manager stopped between the creates of a dual-stack pod) gets the
//     missing families, allocated and recorded now.
//
// Only the confirm step reads; in the common case (every record in the
// cache, names this pod) a pass makes no API call. A record this manager
// created or confirmed within cacheLag is taken as it is: the cache may not
// show it yet, and asking the API server would cost the pod's allocation a
// second write.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// cacheLag is how long a record this manager just created or confirmed is
// trusted without looking at the cache.
const cacheLag = 5 * time.Second

// ReasonExtraAddressReleased is the event reason when a pod that held two
// addresses of one family loses one.
const ReasonExtraAddressReleased = "ExtraAddressReleased"

func (r *Reconciler) complete(ctx context.Context, key string, pod *corev1.Pod, held []holding) (ctrl.Result, error) {
	held, err := r.followOwner(ctx, key, pod, held)
	if err != nil {
		return ctrl.Result{}, err
	}
	held, err = r.confirm(ctx, key, pod, held)
	if err != nil {
		return ctrl.Result{}, err
	}
	if held, err = r.onePerFamily(ctx, key, pod, held); errors.Is(err, errUseUnknown) {
		return ctrl.Result{RequeueAfter: useRetry}, nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if len(held) == 0 {
		return r.allocate(ctx, key, pod)
	}
	if len(held) >= held[0].count {
		return ctrl.Result{}, nil
	}
	return r.completeFamilies(ctx, key, pod, held)
}

// followOwner records a new StatefulSet of the same name (one re-created
// after a delete that orphaned its pods) as the owner of the addresses its
// pod holds.
func (r *Reconciler) followOwner(ctx context.Context, key string, pod *corev1.Pod, held []holding) ([]holding, error) {
	set := statefulOwner(pod)
	if set == nil || !sameSet(held, set) || held[0].set.uid == set.uid {
		return held, nil
	}
	for i := range held {
		was := held[i]
		held[i].set = set
		if err := r.ledger.writeBinding(ctx, key, held[i], heldBy(key)); err != nil {
			return nil, r.ledger.afterFailedWrite(ctx, key, was, err)
		}
	}
	r.held.set(key, held)
	log.FromContext(ctx).Info("addresses follow the re-created StatefulSet", "pod", key, "statefulset", set.name, "uid", set.uid)
	return held, nil
}

// confirm keeps the holdings whose records bind this pod, creating the
// records that are missing and finishing the writes whose outcome was
// unknown; a holding whose record another holder has goes to that holder.
func (r *Reconciler) confirm(ctx context.Context, key string, pod *corev1.Pod, held []holding) ([]holding, error) {
	kept := make([]holding, 0, len(held))
	for i, hd := range held {
		if !hd.recorded.IsZero() && time.Since(hd.recorded) < cacheLag {
			kept = append(kept, hd)
			continue
		}
		ok, err := r.confirmOne(ctx, key, pod, &hd)
		if err != nil {
			r.held.set(key, append(kept, held[i:]...))
			return nil, err
		}
		if ok {
			kept = append(kept, hd)
		}
	}
	r.held.set(key, kept)
	return kept, nil
}

// confirmOne makes the record of hd bind pod: it reports false when the
// record turned out to be another holder's (memory follows it).
func (r *Reconciler) confirmOne(ctx context.Context, key string, pod *corev1.Pod, hd *holding) (bool, error) {
	ipi := &estuaryv1.IPInstance{}
	err := r.client.Get(ctx, client.ObjectKey{Name: hd.name}, ipi)
	if err == nil && bindsPod(ipi, pod) && countOf(ipi) == hd.count {
		hd.recorded = time.Now()
		return true, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("read ipinstance %s of %s: %w", hd.name, key, err)
	}
	if err != nil {
		err = r.client.Create(ctx, r.ledger.instance(pod, *hd))
		if err == nil {
			hd.recorded = time.Now()
			return true, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return false, fmt.Errorf("re-record %s for pod %s: %w", hd.lease.Addr, key, err)
		}
	}
	// The record exists and the cache says it does not bind this pod as
	// held (or has not seen it): write what this pod holds, if the record
	// is this pod's name's, already binds it, or is still kept by the pod's
	// workload (a hand-over whose answer was lost); else it is another's.
	exp := heldBy(key)
	if hd.owner.Kind != "" {
		exp = exp.or(hd.owner.Key(), estuaryv1.IPInstanceRetained, estuaryv1.IPInstanceReserved)
	}
	hd.podUID, hd.node, hd.phase, hd.pod = string(pod.UID), pod.Spec.NodeName, estuaryv1.IPInstanceBound, pod.Name
	err = r.ledger.writeBinding(ctx, key, *hd, exp)
	if he, ok := asHeldElsewhere(err); ok {
		return false, r.ledger.giveTo(ctx, key, *hd, he.record)
	}
	if err != nil {
		return false, err
	}
	hd.recorded = time.Now()
	return true, nil
}

// bindsPod: the record binds its address to pod: Bound, to pod's name and
// UID.
func bindsPod(ipi *estuaryv1.IPInstance, pod *corev1.Pod) bool {
	b := ipi.Spec.Binding
	return ipi.Status.Phase == estuaryv1.IPInstanceBound && b.Namespace == pod.Namespace && b.PodName == pod.Name && b.PodUID == string(pod.UID)
}

// onePerFamily releases every address of a family but one: the one the
// pod uses (status.podIPs), else the lowest. While the pod reports no
// address it waits (errUseUnknown): the node may have set up either one
// already, and the kubelet reports which.
func (r *Reconciler) onePerFamily(ctx context.Context, key string, pod *corev1.Pod, held []holding) ([]holding, error) {
	var kept, extra []holding
	for _, hd := range held {
		i := slices.IndexFunc(kept, func(k holding) bool { return k.lease.Family == hd.lease.Family })
		switch {
		case i < 0:
			kept = append(kept, hd)
		case better(pod, hd.lease.Addr, kept[i].lease.Addr):
			extra, kept[i] = append(extra, kept[i]), hd
		default:
			extra = append(extra, hd)
		}
	}
	if len(extra) == 0 {
		return held, nil
	}
	if len(pod.Status.PodIPs) == 0 {
		log.FromContext(ctx).Info("pod holds two addresses of one family; waiting for the one it uses", "pod", key, "addresses", addrs(held))
		return nil, errUseUnknown
	}
	r.held.set(key, kept)
	if err := r.ledger.release(ctx, key, extra); err != nil {
		r.held.set(key, append(kept, extra...))
		return nil, err
	}
	r.held.set(key, kept)
	r.events.Eventf(pod, nil, corev1.EventTypeWarning, ReasonExtraAddressReleased, "Allocate",
		"pod %s held %d addresses of one family; released %v, kept %v", key, len(extra)+1, addrs(extra), addrs(kept))
	return kept, nil
}

// errUseUnknown: a pod holds two addresses of one family and does not
// report yet which one it uses.
var errUseUnknown = errors.New("the pod does not report the address it uses yet")

// useRetry is how soon a pod holding two addresses of one family is looked
// at again if no status update of its own comes first.
const useRetry = 5 * time.Second

// better: a is the one to keep rather than b, the one the pod uses or else
// the lower.
func better(pod *corev1.Pod, a, b netip.Addr) bool {
	if ua, ub := usesAddr(pod, a), usesAddr(pod, b); ua != ub {
		return ua
	}
	return a.Less(b)
}

func usesAddr(pod *corev1.Pod, a netip.Addr) bool {
	for _, pip := range pod.Status.PodIPs {
		if b, err := netip.ParseAddr(pip.IP); err == nil && b == a {
			return true
		}
	}
	return false
}

// completeFamilies allocates and records the families the pod asks for
// but does not hold, each from its own list of named subnets (tried in
// order) when the pod names subnets.
func (r *Reconciler) completeFamilies(ctx context.Context, key string, pod *corev1.Pod, held []holding) (ctrl.Result, error) {
	req, f, err := r.planner.plan(ctx, key, pod)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("complete the addresses of %s: %w", key, err)
	}
	missing := missingFamilies(req, held)
	if len(missing) == 0 {
		return ctrl.Result{}, nil
	}
	var leases []ipam.Lease
	if f.fixed.Wants() {
		var prior []holding
		if leases, prior, missing, err = r.fixed.completeNamed(ctx, key, pod, f, held, missing); err != nil {
			if ref, denied := asRefusal(err); denied {
				r.events.Eventf(pod, nil, corev1.EventTypeWarning, ref.reason, "Allocate", "cannot complete the addresses of pod %s: %v", key, err)
				return ctrl.Result{RequeueAfter: r.retryExhausted}, nil
			}
			return ctrl.Result{}, fmt.Errorf("complete the addresses of %s: %w", key, err)
		}
		held = append(held, prior...)
	}
	if len(missing) > 0 {
		more, err := r.alloc.Allocate(narrow(req, missing))
		if err != nil {
			r.ledger.abandon(ctx, key, leases, nil)
			return ctrl.Result{}, fmt.Errorf("complete the addresses of %s (%v): %w", key, missing, err)
		}
		leases = append(leases, more...)
	}
	log.FromContext(ctx).Info("completing a partly recorded pod", "pod", key, "held", addrs(held), "families", familiesOfLeases(leases))
	return r.ledger.recordLeases(ctx, key, pod, leases, held[0].count, held, f)
}

// missingFamilies lists the families req asks for that held lacks.
func missingFamilies(req ipam.Request, held []holding) []family.Family {
	var out []family.Family
	for _, f := range requestFamilies(req) {
		if !slices.ContainsFunc(held, func(hd holding) bool { return hd.lease.Family == f }) {
			out = append(out, f)
		}
	}
	return out
}
