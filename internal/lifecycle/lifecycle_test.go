package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// recorder notes the hooks' calls in the order they happen.
type recorder struct{ calls []string }

func (r *recorder) hook(name string, startErr, stopErr error) Hook {
	return Hook{Name: name,
		Start: func(context.Context) error { r.calls = append(r.calls, "start "+name); return startErr },
		Stop:  func(context.Context) error { r.calls = append(r.calls, "stop "+name); return stopErr },
	}
}

// calledInOrder fails t unless the hooks were called as want says.
func (r *recorder) calledInOrder(t *testing.T, want ...string) {
	t.Helper()
	if !slices.Equal(r.calls, want) {
		t.Errorf("calls %q, want %q", r.calls, want)
	}
}

// startAndStop starts l and stops it, failing t on an error.
func startAndStop(t *testing.T, l *Lifecycle) {
	t.Helper()
	if err := l.Start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	if err := l.Stop(t.Context()); err != nil {
		t.Fatalf("stop: %v", err)
	}
}

func TestStartsInRegistrationOrderAndStopsInReverse(t *testing.T) {
	var r recorder
	var l Lifecycle
	for _, n := range []string{"a", "b", "c"} {
		l.Append(r.hook(n, nil, nil))
	}
	startAndStop(t, &l)
	r.calledInOrder(t, "start a", "start b", "start c", "stop c", "stop b", "stop a")
	if err := l.Stop(t.Context()); err != nil || len(r.calls) != 6 {
		t.Errorf("a second Stop ran hooks again (%v): %q", err, r.calls)
	}
}

func TestStartFailureStopsTheStartedInReverse(t *testing.T) {
	var r recorder
	var l Lifecycle
	boom := errors.New("boom")
	l.Append(r.hook("a", nil, nil))
	l.Append(Hook{Name: "no stop", Start: func(context.Context) error { r.calls = append(r.calls, "start no stop"); return nil }})
	l.Append(r.hook("b", nil, nil))
	l.Append(r.hook("c", boom, nil))
	l.Append(r.hook("d", nil, nil))
	err := l.Start(t.Context())
	if !errors.Is(err, boom) {
		t.Fatalf("start returned %v, want the failing hook's error", err)
	}
	// The failed hook is not stopped, the later ones neither start nor stop.
	r.calledInOrder(t, "start a", "start no stop", "start b", "start c", "stop b", "stop a")
	if err := l.Stop(t.Context()); err != nil || len(r.calls) != 6 {
		t.Errorf("Stop after a failed Start ran hooks again (%v): %q", err, r.calls)
	}
}

func TestStartRollbackOutlivesTheStartContext(t *testing.T) {
	var l Lifecycle
	ctx, cancel := context.WithCancel(t.Context())
	var stopCtxErr error
	stopped := false
	l.Append(Hook{Name: "a", Stop: func(ctx context.Context) error { stopped, stopCtxErr = true, ctx.Err(); return nil }})
	l.Append(Hook{Name: "b", Start: func(context.Context) error { cancel(); return context.Canceled }})
	if err := l.Start(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("start returned %v, want context.Canceled", err)
	}
	if !stopped || stopCtxErr != nil {
		t.Errorf("rollback stopped a: %v with context error %v; want stopped under a live context", stopped, stopCtxErr)
	}
}

func TestStopJoinsEveryErrorAndStopsEveryHook(t *testing.T) {
	var r recorder
	var l Lifecycle
	errA, errC := errors.New("a failed"), errors.New("c failed")
	l.Append(r.hook("a", nil, errA))
	l.Append(r.hook("b", nil, nil))
	l.Append(r.hook("c", nil, errC))
	if err := l.Start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	err := l.Stop(t.Context())
	if !errors.Is(err, errA) || !errors.Is(err, errC) {
		t.Errorf("stop returned %v, want both stop errors", err)
	}
	for _, name := range []string{"stop a:", "stop c:"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("stop error %v does not name %q", err, name)
		}
	}
	r.calledInOrder(t, "start a", "start b", "start c", "stop c", "stop b", "stop a")
}

func TestStopIsBoundedByItsContext(t *testing.T) {
	var r recorder
	var l Lifecycle
	release := make(chan struct{})
	defer close(release)
	l.Append(r.hook("first", nil, nil))
	l.Append(Hook{Name: "stuck", Stop: func(context.Context) error { <-release; return nil }})
	l.Append(r.hook("last", nil, nil))
	if err := l.Start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Stop(ctx) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return after its context ended")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("stop returned %v, want the context's deadline", err)
	}
	if err == nil || !strings.Contains(err.Error(), "stop stuck") || !strings.Contains(err.Error(), `"first"`) {
		t.Errorf("stop error %v does not name the stuck hook and the one left", err)
	}
	// The hooks after the deadline are not run.
	r.calledInOrder(t, "start first", "start last", "stop last")
}

func TestStartAfterStartRunsOnlyTheNewHooks(t *testing.T) {
	var r recorder
	var l Lifecycle
	l.Append(r.hook("a", nil, nil))
	if err := l.Start(t.Context()); err != nil {
		t.Fatalf("start: %v", err)
	}
	l.Append(r.hook("b", nil, nil))
	startAndStop(t, &l)
	r.calledInOrder(t, "start a", "start b", "stop b", "stop a")
}
