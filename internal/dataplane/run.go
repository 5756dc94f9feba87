package dataplane

import (
	"context"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/state"
)

// Run reconciles until ctx ends: once at start, on every receive from
// trigger and every resync interval, each time with the whole state desired
// returns at that moment. Triggers that arrive during a reconcile collapse
// into one more pass, because each pass sees the latest desired state anyway.
// A resync of zero or less disables the periodic pass. Failures go to onErr
// (which may be nil) and are retried on the next pass.
func (r *Reconciler) Run(ctx context.Context, desired func() state.State, trigger <-chan struct{},
	resync time.Duration, onErr func(error)) {
	var periodic <-chan time.Time
	if resync > 0 {
		tick := time.NewTicker(resync)
		defer tick.Stop()
		periodic = tick.C
	}
	for {
		if _, err := r.Reconcile(ctx, desired()); err != nil && onErr != nil && ctx.Err() == nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-trigger:
		case <-periodic:
		}
	}
}
