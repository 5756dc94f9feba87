package podipam

import (
	"context"
	"errors"
	"fmt"
	"time"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/workload"
	"github.com/estuary-cni/estuary/pkg/ipam"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The pool controller. A workload's pool is the addresses kept for a
// workload (Retained) or reserved for it (Reserved), held under the
// workload's key (namespace/Kind/name, keys.go) rather than a pod's. The
// controller is a typed one: its requests are workload.Refs (namespace,
// kind, name), queued by the records held under a workload's key (the
// IPInstance watch, mapped by instanceToPool), by the ledger when it hands
// an address to a pool or to the holder a record names, by the optional
// watches when a virtual machine is deleted, and by the audit.
//
// Its reconcile adopts records written without this manager (kubectl
// estuary reserve), forgets addresses whose records were released by hand,
// releases what a deleted machine or namespace kept and what expired, and
// comes back at the next deadline. Pods of the workload take from the pool
// in their own reconciles (pool.go, fixed.go), so the pool's holdings
// change only through holdings.take and holdings.add, never by replacing
// the key's list: a holding is in the pool or in a pod's hands, never both.
// The pod controller and this one share the holdings, the pending
// adoptions, the allocator and the ledger; nothing else.

// poolReconciler settles workloads' pools.
type poolReconciler struct {
	store     recordStore
	alloc     Allocator
	held      *holdings
	pending   *pendingAdoptions
	ready     *readiness
	ledger    *ledger
	retention *retainer
}

// Reconcile settles the pool of one workload.
func (p *poolReconciler) Reconcile(ctx context.Context, pool workload.Ref) (reconcile.Result, error) {
	if err := p.ready.wait(ctx); err != nil {
		return reconcile.Result{}, err
	}
	key := pool.Key()
	items, err := p.store.HeldBy(ctx, key)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("list ipinstances of %s: %w", key, err)
	}
	recorded := p.adoptRecorded(ctx, key, items)
	if done, err := p.retention.releaseIfMachineGone(ctx, pool); err != nil || done {
		return reconcile.Result{}, err
	}
	if gone, err := p.retention.namespaceGone(ctx, key); err != nil || gone {
		if err != nil {
			return reconcile.Result{}, err
		}
		all := p.held.takeInHand(key, func(holding, []holding) bool { return true })
		log.FromContext(ctx).Info("namespace deleted: releasing what its workload kept", "workload", key, "addresses", addrs(all))
		return reconcile.Result{}, p.ledger.releaseTaken(ctx, key, all)
	}
	return p.settle(ctx, key, recorded)
}

// adoptRecorded adopts the records of key, items, that this manager does
// not hold, and those the audit found; it returns the names recorded.
func (p *poolReconciler) adoptRecorded(ctx context.Context, key string, items []estuaryv1.IPInstance) map[string]bool {
	pending := p.pending.take(key)
	for _, hd := range fromInstances(items)[key] {
		if _, ok := p.held.find(key, hd.name); !ok {
			pending = append(pending, hd)
		}
	}
	recorded := map[string]bool{}
	for i := range items {
		recorded[items[i].Name] = true
	}
	for _, hd := range pending {
		if recorded[hd.name] {
			p.adoptPooled(ctx, key, hd)
		}
	}
	return recorded
}

// settle forgets what was released by hand and releases what expired;
// it comes back at the next deadline.
func (p *poolReconciler) settle(ctx context.Context, key string, recorded map[string]bool) (reconcile.Result, error) {
	now := time.Now()
	gone := p.held.take(key, func(hd holding, _ []holding) bool {
		return !recorded[hd.name] && now.Sub(hd.recorded) > cacheLag
	})
	for _, hd := range gone {
		if err := p.alloc.Release(hd.lease.Subnet, hd.lease.Addr, key); err != nil && !errors.Is(err, ipam.ErrNotAllocated) {
			log.FromContext(ctx).Error(err, "forget an address released by hand", "workload", key, "address", hd.lease.Addr)
		}
		log.FromContext(ctx).Info("address released by hand", "workload", key, "address", hd.lease.Addr)
	}
	expired := p.held.takeInHand(key, func(hd holding, _ []holding) bool {
		return !hd.expires.IsZero() && !hd.expires.After(now)
	})
	if len(expired) > 0 {
		log.FromContext(ctx).Info("retention expired", "workload", key, "addresses", addrs(expired))
		if err := p.ledger.releaseTaken(ctx, key, expired); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{RequeueAfter: max(expiresIn(p.held.get(key), time.Now()), 0)}, nil
}

// adoptPooled holds hd, a record of key's that this manager does not hold,
// for the workload, if the allocator has the address free (or already
// holds it for the workload).
func (p *poolReconciler) adoptPooled(ctx context.Context, key string, hd holding) {
	if p.held.isInHand(hd.name) {
		return // a hand-over or release is writing it: its outcome decides
	}
	if rec, err := p.alloc.Lookup(hd.lease.Subnet, hd.lease.Addr); err == nil {
		if rec.Owner != key {
			return // another key holds it: that key's reconcile or the audit settles it
		}
	} else if !errors.Is(err, ipam.ErrNotAllocated) {
		log.FromContext(ctx).Error(err, "adopt a record", "workload", key, "address", hd.lease.Addr)
		return
	} else if err := p.alloc.Assign(hd.lease.Subnet, hd.lease.Addr, key); err != nil {
		log.FromContext(ctx).Error(err, "adopt a record", "workload", key, "address", hd.lease.Addr)
		return
	}
	_ = p.alloc.Retain(hd.lease.Subnet, hd.lease.Addr, key)
	hd.recorded = time.Now()
	if !p.held.adoptInto(key, hd) {
		return // back in the list, or taken for a write, since the list was read
	}
	log.FromContext(ctx).Info("holding a record for its workload", "workload", key, "address", hd.lease.Addr, "phase", hd.phase)
}
