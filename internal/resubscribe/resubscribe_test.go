package resubscribe

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"
)

// Failed runs are retried after doubling waits up to the cap, each failure
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
	want := []time.Duration{time.Millisecond, 2 * time.Millisecond, 4 * time.Millisecond, 4 * time.Millisecond}
	if calls != 5 || !slices.Equal(waits, want) {
		t.Errorf("%d calls, waits %v; want 5 calls, waits %v", calls, waits, want)
	}
}
