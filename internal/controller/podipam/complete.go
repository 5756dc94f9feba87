package podipam

// A live pod that already holds addresses is brought in line with the
// records on every pass, so that an interrupted or uncertain allocation
// ends in exactly one recorded address per family the pod asks for:
//
//   - confirm: every held address must have a record that names this pod.
//     A record missing from the cache is created again; a create that finds
//     the record already there reads it live. A record that names another
//     pod means the address is that pod's: it is held for its owner and
//     dropped from this pod (a split brain, or an unknown create outcome
//     that turned out to be someone else's).
//   - one per family: a pod holding two addresses of one family keeps the
//     one it uses (status.podIPs) or else the lowest, and releases the rest.
//     The choice depends only on the pod and the addresses, so two managers
//     that both see the pair (a split brain) keep the same one.
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
	if held, err = r.onePerFamily(ctx, key, pod, held); err != nil {
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
		held[i].set = set
		if err := r.writeBinding(ctx, key, held[i]); err != nil {
			return nil, err
		}
	}
	r.held.set(key, held)
	log.FromContext(ctx).Info("addresses follow the re-created StatefulSet", "pod", key, "statefulset", set.name, "uid", set.uid)
	return held, nil
}

// confirm keeps the holdings whose records name this pod, creating the
// records that are missing.
func (r *Reconciler) confirm(ctx context.Context, key string, pod *corev1.Pod, held []holding) ([]holding, error) {
	kept := make([]holding, 0, len(held))
	for _, hd := range held {
		if !hd.recorded.IsZero() && time.Since(hd.recorded) < cacheLag {
			kept = append(kept, hd)
			continue
		}
		ipi := &estuaryv1.IPInstance{}
		err := r.Client.Get(ctx, client.ObjectKey{Name: hd.name}, ipi)
		if err == nil && names(ipi, pod) {
			hd.recorded = time.Now()
			kept = append(kept, hd)
			continue
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("read ipinstance %s of %s: %w", hd.name, key, err)
		}
		if err != nil {
			err = r.Client.Create(ctx, r.instance(pod, hd))
			if err == nil {
				hd.recorded = time.Now()
				kept = append(kept, hd)
				continue
			}
			if !apierrors.IsAlreadyExists(err) {
				r.held.set(key, held)
				return nil, fmt.Errorf("re-record %s for pod %s: %w", hd.lease.Addr, key, err)
			}
		}
		// The record exists and the cache says it is not this pod's (or
		// has not seen it): the API server decides.
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: hd.name}, ipi); err != nil {
			r.held.set(key, held)
			return nil, fmt.Errorf("read ipinstance %s of %s: %w", hd.name, key, err)
		}
		if names(ipi, pod) {
			hd.recorded = time.Now()
			kept = append(kept, hd)
			continue
		}
		if err := r.yield(ctx, key, pod, hd, ipi); err != nil {
			r.held.set(key, held)
			return nil, err
		}
	}
	r.held.set(key, kept)
	return kept, nil
}

// names: the record binds its address to pod's name.
func names(ipi *estuaryv1.IPInstance, pod *corev1.Pod) bool {
	b := ipi.Spec.Binding
	return b.Namespace == pod.Namespace && b.PodName == pod.Name
}

// yield gives up an address this pod held in memory but another pod's
// record holds: the address is held for that record's owner instead.
func (r *Reconciler) yield(ctx context.Context, key string, pod *corev1.Pod, hd holding, other *estuaryv1.IPInstance) error {
	rec, err := record(other)
	if err != nil {
		return err
	}
	if err := r.Alloc.Release(hd.lease.Subnet, hd.lease.Addr, key); err != nil && !isNotHeld(err) {
		return fmt.Errorf("give up %s of %s: %w", hd.lease.Addr, key, err)
	}
	if err := r.Alloc.Assign(rec.Subnet, rec.Addr, rec.Owner); err != nil && !isNotHeld(err) {
		return fmt.Errorf("hold recorded address %s for %s: %w", rec.Addr, rec.Owner, err)
	}
	r.Events.Eventf(pod, other, corev1.EventTypeWarning, "AddressConflict", "Allocate",
		"address %s is recorded for %s; pod %s no longer holds it", hd.lease.Addr, rec.Owner, key)
	log.FromContext(ctx).Info("address recorded for another pod; given up", "pod", key, "address", hd.lease.Addr, "holder", rec.Owner)
	return nil
}

// isNotHeld: the allocator already agrees (the address is held by someone
// else, or not by this owner).
func isNotHeld(err error) bool {
	return errors.Is(err, ipam.ErrInUse) || errors.Is(err, ipam.ErrNotAllocated)
}

// onePerFamily releases every address of a family but one: the one the pod
// uses, else the lowest.
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
	r.held.set(key, kept)
	if err := r.release(ctx, key, extra); err != nil {
		r.held.set(key, append(kept, extra...))
		return nil, err
	}
	r.held.set(key, kept)
	r.Events.Eventf(pod, nil, corev1.EventTypeWarning, ReasonExtraAddressReleased, "Allocate",
		"pod %s held %d addresses of one family; released %v, kept %v", key, len(extra)+1, addrs(extra), addrs(kept))
	return kept, nil
}

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
	req, f, err := r.plan(ctx, key, pod)
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
		if leases, prior, missing, err = r.completeNamed(ctx, key, pod, f, held, missing); err != nil {
			if ref, denied := asRefusal(err); denied {
				r.Events.Eventf(pod, nil, corev1.EventTypeWarning, ref.reason, "Allocate", "cannot complete the addresses of pod %s: %v", key, err)
				return ctrl.Result{RequeueAfter: r.RetryExhausted}, nil
			}
			return ctrl.Result{}, fmt.Errorf("complete the addresses of %s: %w", key, err)
		}
		held = append(held, prior...)
	}
	if len(missing) > 0 {
		more, err := r.Alloc.Allocate(narrow(req, missing))
		if err != nil {
			r.abandon(ctx, key, leases, nil)
			return ctrl.Result{}, fmt.Errorf("complete the addresses of %s (%v): %w", key, missing, err)
		}
		leases = append(leases, more...)
	}
	log.FromContext(ctx).Info("completing a partly recorded pod", "pod", key, "held", addrs(held), "families", familiesOfLeases(leases))
	return r.recordLeases(ctx, key, pod, leases, held[0].count, held, f)
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
