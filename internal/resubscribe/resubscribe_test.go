package resubscribe

import (
	"context"
	"errors"
	"testing"
	"time"
)

// Failed runs are retried after doubling waits up to the cap, each
// jittered by at most Jitter of its base, each failure
// is reported with its error, and Run returns once ctx ends.
func TestRunBacksOffAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	boom := errors.New("subscription closed")
	calls := 0
	var waits []time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, time.Millisecond, 4*time.Millisecond, func(context.Context) error {
			calls++
			if calls == 5 {
				cancel()
				return nil
			}
			return boom
		}, func(err error, wait time.Duration) {
			if !errors.Is(err, boom) {
				t.Errorf("failed got %v, want the run's error", err)
			}
			waits = append(waits, wait)
		})
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after ctx ended")
	}
	base := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}
	if calls != 5 || len(waits) != len(base) {
		t.Fatalf("%d calls, waits %v; want 5 calls, waits of bases %v", calls, waits, base)
	}
	for i, w := range waits {
		if limit := time.Duration(float64(base[i]) * (1 + Jitter)); w < base[i] || w >= limit {
			t.Errorf("wait %d is %v, want in [%v, %v)", i, w, base[i], limit)
		}
	}
}
