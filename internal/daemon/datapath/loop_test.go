package datapath

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

// runLoop starts the loop with a sync that counts its calls.
func runLoop(t *testing.T, opts Options) (*Syncer, *atomic.Int32) {
	t.Helper()
	return runLoopWith(t, opts, func(int32) error { return nil })
}

// runLoopWith starts the loop with a sync that counts its calls and returns
// result(call number, from 1).
func runLoopWith(t *testing.T, opts Options, result func(int32) error) (*Syncer, *atomic.Int32) {
	t.Helper()
	s := &Syncer{opts: withDefaults(opts), trigger: NewTrigger()}
	s.opts.Log = logr.Discard()
	var n atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.loop(ctx, func(context.Context) error { return result(n.Add(1)) })
	}()
	t.Cleanup(func() { cancel(); <-done })
	return s, &n
}

func waitFor(t *testing.T, n *atomic.Int32, want int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.Load() < want {
		if time.Now().After(deadline) {
			t.Fatalf("%d syncs, want %d", n.Load(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTriggersWithinTheQuietWindowCostOneSync(t *testing.T) {
	s, n := runLoop(t, Options{Quiet: 300 * time.Millisecond, MaxDelay: 5 * time.Second})
	waitFor(t, n, 1) // the initial sync
	for range 100 {
		s.trigger.Poke()
	}
	waitFor(t, n, 2)
	time.Sleep(600 * time.Millisecond)
	if got := n.Load(); got != 2 {
		t.Fatalf("100 triggers in a burst gave %d syncs after the initial one, want 1", got-1)
	}
}

func TestSteadyTriggersSyncWithinMaxDelay(t *testing.T) {
	s, n := runLoop(t, Options{Quiet: time.Hour, MaxDelay: 100 * time.Millisecond})
	waitFor(t, n, 1)
	stop := time.After(2 * time.Second)
	triggers := 0
	for loop := true; loop; {
		select {
		case <-stop:
			loop = false
		case <-time.After(10 * time.Millisecond):
			s.trigger.Poke()
			triggers++
		}
	}
	// The quiet window never passes; only MaxDelay ends each wait.
	got := n.Load() - 1
	if got < 2 || int(got) > triggers/3 {
		t.Fatalf("%d triggers over 2s gave %d syncs; want at least 2 and far fewer than triggers", triggers, got)
	}
}

func TestPeriodicResyncWithoutTriggers(t *testing.T) {
	_, n := runLoop(t, Options{Resync: 50 * time.Millisecond})
	waitFor(t, n, 3)
}

func TestFailedSyncIsRetriedWithoutTriggers(t *testing.T) {
	// No trigger and no periodic resync within the test: only the retry
	// after a failure can run the sync again.
	_, n := runLoopWith(t, Options{Resync: time.Hour}, func(call int32) error {
		if call <= 2 {
			return errors.New("injected failure")
		}
		return nil
	})
	waitFor(t, n, 3)
}
