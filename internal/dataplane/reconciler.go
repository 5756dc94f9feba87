// Package dataplane keeps a node's kernel networking state (routes, policy
// rules, neighbours, VXLAN FDB entries, addresses) in line with what estuary
// wants. It owns the reconcile loop's contract; the state package owns the
// values and the diff, and the ops package owns every netlink call.
//
// # Design
//
// Desired state is computed as plain values by the caller, from the API and
// the node's state DB. Reconcile reads what the kernel has, diffs the two and
// applies only the difference, then reads again to confirm.
//
// Ownership. The kernel is shared with kube-proxy, the node's own network
// configuration and the administrator. estuary deletes only what it owns
// (desired.Ownership): routes carrying its protocol number (0xE5) or in its
// tables (1000-1999), rules in its priority range (1000-1999), permanent and
// proxy neighbours and FDB entries on its devices, and addresses with its
// mark (scope link + noprefixroute). Everything else is read, never deleted;
// a desired object with the key of a foreign one does overwrite it.
//
// Ordering. A Plan is applied in the order of desired.Plan.Steps: add
// addresses, routes (on-link before via a gateway), neighbours, FDB, then
// rules; delete rules, routes, neighbours, FDB, then addresses. A rule only
// starts steering packets into a table once the table is filled, and stops
// before the table is emptied. An address replacing one in the same subnet
// is added after the old one is deleted, and the kernel's local route of an
// address that must have none (desired.State.Absent) is deleted right after
// it. Changed objects are rewritten in place (replace), not deleted and
// added, so traffic sees no gap.
//
// One reconcile for every writer. The routing plan's three owners
// (desired.Owner: local-pods, overlay, underlay) each run a Reconciler under
// their Owner.Ownership; only their desired states differ.
//
// Level-triggered. Reconcile takes the whole desired state, not an event.
// Running it after a restart, a missed event or a hand edit of the kernel
// converges the same way, and running it again changes nothing, so pods
// keep connectivity across daemon restarts. The caller runs it on every
// change and periodically; no history of past operations is kept.
package dataplane

import (
	"context"
	"fmt"
	"sync"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
)

// Reconciler brings one network namespace's kernel state to a desired state.
// It is safe for concurrent use; reconciles run one at a time.
type Reconciler struct {
	mu  sync.Mutex
	h   *ops.Handle
	own desired.Ownership
}

// NewReconciler returns a reconciler writing through h with ownership own.
// The caller keeps ownership of h and closes it after the last Reconcile.
func NewReconciler(h *ops.Handle, own desired.Ownership) *Reconciler {
	return &Reconciler{h: h, own: own}
}

// Reconcile reads the kernel's state, applies the difference to want and
// returns the plan it applied. It then reads again and fails if the kernel
// still differs, naming what is left (for example a route whose device does
// not exist yet); the next Reconcile retries it.
func (r *Reconciler) Reconcile(ctx context.Context, want desired.State) (desired.Plan, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	addrs := !r.own.NoAddrs || len(want.Addrs) > 0
	neighs := r.own.OwnsNeighs() || len(want.Neighs) > 0
	return r.named(r.reconcile(ctx, ops.Scope{FDBDevice: r.own.OwnsDevice, NoAddrs: !addrs, NoNeighs: !neighs},
		func(own desired.Ownership, _ desired.State) (desired.State, desired.Ownership) { return want, own }))
}

// ReconcileLive is Reconcile for a desired state, or an ownership, that
// depends on the moment: live is called after each read of the kernel
// with the reconciler's ownership and what was read, and returns the state
// wanted at that moment and the ownership, narrowed, to diff it under. The
// local pods skip the devices of attachments whose ADD or DEL is in flight
// (desired.Ownership.Skip): because the state is taken after the read, an
// object written before the read by a party still busy is left alone, and
// one written after the read is not seen, so nothing in flight is deleted.
// The underlay narrows the neighbours and addresses it owns to its input's.
// Addresses and neighbours are read only when the ownership owns some.
func (r *Reconciler) ReconcileLive(ctx context.Context, live Live) (desired.Plan, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.named(r.reconcile(ctx, ops.Scope{FDBDevice: r.own.OwnsDevice, NoAddrs: r.own.NoAddrs, NoNeighs: !r.own.OwnsNeighs()}, live))
}

// Live computes a desired state and its ownership from the reconciler's
// ownership and the kernel's state just read (which it must not change).
type Live func(own desired.Ownership, actual desired.State) (desired.State, desired.Ownership)

// named prefixes an error with the owner's name.
func (r *Reconciler) named(plan desired.Plan, err error) (desired.Plan, error) {
	if err != nil && r.own.Owner != "" {
		return plan, fmt.Errorf("%s: %w", r.own.Owner, err)
	}
	return plan, err
}

// reconcile reads, diffs, applies and reads again; sc leaves out what can
// not matter (addresses or neighbours that are neither owned nor desired,
// which Diff neither adds nor deletes).
func (r *Reconciler) reconcile(ctx context.Context, sc ops.Scope, live Live) (desired.Plan, error) {
	if err := ctx.Err(); err != nil {
		return desired.Plan{}, fmt.Errorf("reconcile: %w", err)
	}
	want, own, actual, err := r.snapshot(sc, live)
	if err != nil {
		return desired.Plan{}, fmt.Errorf("reconcile: %w", err)
	}
	plan := own.Diff(want, actual)
	if plan.Empty() {
		return plan, nil
	}
	if err := ctx.Err(); err != nil {
		return desired.Plan{}, fmt.Errorf("reconcile: %w", err)
	}
	applyErr := r.h.Apply(plan)
	want, own, after, err := r.snapshot(sc, live)
	if err != nil {
		return plan, fmt.Errorf("reconcile: %w", err)
	}
	if left := own.Diff(want, after); !left.Empty() {
		if applyErr != nil {
			return plan, fmt.Errorf("reconcile: kernel still differs after apply:\n%s: %w", left, applyErr)
		}
		return plan, fmt.Errorf("reconcile: kernel still differs after apply:\n%s", left)
	}
	if applyErr != nil {
		return plan, fmt.Errorf("reconcile: %w", applyErr)
	}
	return plan, nil
}

// snapshot reads the kernel, then takes the desired state and the ownership.
func (r *Reconciler) snapshot(sc ops.Scope, live Live) (desired.State, desired.Ownership, desired.State, error) {
	actual, err := r.h.Read(sc)
	if err != nil {
		return desired.State{}, desired.Ownership{}, desired.State{}, fmt.Errorf("read kernel state: %w", err)
	}
	want, own := live(r.own, actual)
	return want, own, actual, nil
}
