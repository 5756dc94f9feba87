// Package resubscribe owns keeping a subscription alive: a function that
// runs until its subscription (a netlink socket, a watch) fails or ends is
// run again after a doubling wait, capped, which starts over after a run
// that lasted longer than the cap. Each wait is jittered (apimachinery's
// wait.Backoff) so that the nodes of a cluster that lost their
// subscriptions together do not come back in step.
package resubscribe

import (
	"context"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Jitter is the fraction by which each wait may be longer than its base:
// a wait is in [base, base*(1+Jitter)).
const Jitter = 0.2

// Run calls run until ctx ends. Each time run returns while ctx is live,
// failed gets its error and the wait before the next call: first, then
// doubling up to limit, each jittered.
func Run(ctx context.Context, first, limit time.Duration, run func(context.Context) error,
	failed func(err error, wait time.Duration)) {
	fresh := func() wait.Backoff {
		return wait.Backoff{Duration: first, Factor: 2, Jitter: Jitter, Steps: math.MaxInt32, Cap: limit}
	}
	backoff := fresh()
	for {
		start := time.Now()
		err := run(ctx)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > limit {
			backoff = fresh() // it ran a while: a fresh failure
		}
		d := backoff.Step()
		failed(err, d)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
