package datapath

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// waitState polls p until ok holds for its state, or fails after a deadline.
func waitState(t *testing.T, p *Progress, what string, ok func(PassState) bool) PassState {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := p.State()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: progress %+v", what, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestProgressRecordsGoodFailedAndHungPasses: a failed pass leaves the last
// good pass where it was and carries its error; a good pass moves it, and
// the gauge estuary_datapath_last_good_pass_timestamp_seconds with it; a
// pass that hangs shows as running since its start, with the last good
// pass still the one before it.
func TestProgressRecordsGoodFailedAndHungPasses(t *testing.T) {
	p, m := NewProgress(), NewMetrics()
	if st := p.State(); st.Started.IsZero() || !st.LastGood.IsZero() || !st.LastStart.IsZero() {
		t.Fatalf("new progress %+v, want only Started", st)
	}
	if v := testutil.ToFloat64(m.lastGood); v != 0 {
		t.Fatalf("last good pass gauge before any pass = %v, want 0", v)
	}
	hang, release := make(chan struct{}), make(chan struct{})
	injected := errors.New("injected failure")
	s, n := runLoopWith(t, Options{Resync: time.Hour, Metrics: m, Progress: p}, func(call int32) error {
		switch call {
		case 1:
			return injected
		case 3:
			close(hang)
			<-release
		}
		return nil
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	waitFor(t, n, 1)
	st := waitState(t, p, "after the failed first pass", func(st PassState) bool { return !st.Running && st.LastErr != nil })
	if !errors.Is(st.LastErr, injected) || !st.LastGood.IsZero() {
		t.Fatalf("after a failed pass: %+v, want its error and no good pass", st)
	}
	// The retry succeeds.
	good := waitState(t, p, "after the retry", func(st PassState) bool { return !st.LastGood.IsZero() })
	if good.LastErr != nil || good.LastGood.Before(good.LastStart) {
		t.Fatalf("after a good pass: %+v", good)
	}
	if v, want := testutil.ToFloat64(m.lastGood), float64(good.LastGood.UnixNano())/1e9; v != want {
		t.Errorf("last good pass gauge = %v, want %v", v, want)
	}

	var none *Progress // a loop without progress records nothing
	none.begin(time.Now())
	none.end(time.Now(), nil)
	// Only a poke runs the third pass (Resync is an hour); it hangs.
	s.trigger.Poke()
	select {
	case <-hang:
	case <-time.After(10 * time.Second):
		t.Fatal("the poked third pass did not start")
	}
	hung := waitState(t, p, "while the third pass hangs", func(st PassState) bool { return st.Running })
	if !hung.LastGood.Equal(good.LastGood) || hung.LastStart.Before(good.LastGood) {
		t.Fatalf("while a pass hangs: %+v, want it running since after the last good pass %v", hung, good.LastGood)
	}
	close(release)
	waitState(t, p, "after the hung pass returned", func(st PassState) bool { return st.LastGood.After(good.LastGood) })
}
