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
// (state.Ownership): routes carrying its protocol number (0xE5) or in its
// tables (1000-1999), rules in its priority range (1000-1999), permanent and
// proxy neighbours and FDB entries on its devices, and addresses with its
// mark (scope link + noprefixroute). Everything else is read, never deleted;
// a desired object with the key of a foreign one does overwrite it.
//
// Ordering. A Plan is applied as: add addresses, routes, neighbours, FDB,
// then rules; delete rules, routes, neighbours, FDB, then addresses. A rule
// only starts steering packets into a table once the table is filled, and
// stops before the table is emptied. Changed objects are rewritten in place
// (replace), not deleted and added, so traffic sees no gap.
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

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
)

// Reconciler brings one network namespace's kernel state to a desired state.
// It is safe for concurrent use; reconciles run one at a time.
type Reconciler struct {
	mu  sync.Mutex
	h   *ops.Handle
	own state.Ownership
}

// NewReconciler returns a reconciler writing through h with ownership own.
// The caller keeps ownership of h and closes it after the last Reconcile.
func NewReconciler(h *ops.Handle, own state.Ownership) *Reconciler {
	return &Reconciler{h: h, own: own}
}

// read lists the kernel's state. Addresses are left out when they cannot
// matter: the ownership owns none and none is desired, so Diff neither adds
// nor deletes any.
func (r *Reconciler) read(desired state.State) (state.State, error) {
	sc := ops.Scope{FDBDevice: r.own.OwnsDevice, NoAddrs: r.own.NoAddrs && len(desired.Addrs) == 0}
	s, err := r.h.Read(sc)
	if err != nil {
		return state.State{}, fmt.Errorf("read kernel state: %w", err)
	}
	return s, nil
}

// Reconcile reads the kernel's state, applies the difference to desired and
// returns the plan it applied. It then reads again and fails if the kernel
// still differs, naming what is left (for example a route whose device does
// not exist yet); the next Reconcile retries it.
func (r *Reconciler) Reconcile(ctx context.Context, desired state.State) (state.Plan, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return state.Plan{}, fmt.Errorf("reconcile: %w", err)
	}
	actual, err := r.read(desired)
	if err != nil {
		return state.Plan{}, fmt.Errorf("reconcile: %w", err)
	}
	plan := r.own.Diff(desired, actual)
	if plan.Empty() {
		return plan, nil
	}
	if err := ctx.Err(); err != nil {
		return state.Plan{}, fmt.Errorf("reconcile: %w", err)
	}
	applyErr := r.h.Apply(plan)
	after, err := r.read(desired)
	if err != nil {
		return plan, fmt.Errorf("reconcile: %w", err)
	}
	if left := r.own.Diff(desired, after); !left.Empty() {
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
