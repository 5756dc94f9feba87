// Package resubscribe owns keeping a subscription alive: a function that
// runs until its subscription (a netlink socket, a watch) fails or ends is
// run again after a doubling wait, capped, which starts over after a run
// that lasted longer than the cap.
package resubscribe

import (
	"context"
	"time"
)

// Run calls run until ctx ends. Each time run returns while ctx is live,
// failed gets its error and the wait before the next call.
func Run(ctx context.Context, first, limit time.Duration, run func(context.Context) error,
	failed func(err error, wait time.Duration)) {
	wait := first
	for {
		start := time.Now()
		err := run(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > limit {
			wait = first // it ran a while: a fresh failure
		}
		failed(err, wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, limit)
	}
}
