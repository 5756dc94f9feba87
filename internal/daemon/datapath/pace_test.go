package datapath

import (
	"sync"
	"testing"
	"time"
)

// passLog records when each pass started and ended.
type passLog struct {
	mu    sync.Mutex
	spans [][2]time.Time
}

// timed is a pass result that takes d and records its span.
func (l *passLog) timed(d time.Duration) func(int32) error {
	return func(int32) error {
		start := time.Now()
		time.Sleep(d) // the pass's own work, not a wait for a condition
		l.mu.Lock()
		l.spans = append(l.spans, [2]time.Time{start, time.Now()})
		l.mu.Unlock()
		return nil
	}
}

func (l *passLog) get() [][2]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([][2]time.Time(nil), l.spans...)
}

// TestClusterPokesArePacedByThePassDuration: under a steady stream of
// PokeCluster, every pass after the first starts no sooner than Pace times
// the previous pass's duration after its end.
func TestClusterPokesArePacedByThePassDuration(t *testing.T) {
	var l passLog
	const took = 80 * time.Millisecond
	s, n := runLoopWith(t, Options{Quiet: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond, Pace: 2}, l.timed(took))
	waitFor(t, n, 1)
	stop := time.After(1500 * time.Millisecond)
	for loop := true; loop; {
		select {
		case <-stop:
			loop = false
		case <-time.After(5 * time.Millisecond):
			s.trigger.PokeCluster()
		}
	}
	spans := l.get()
	if len(spans) < 3 {
		t.Fatalf("%d passes under steady cluster pokes, want several", len(spans))
	}
	for i := 1; i < len(spans); i++ {
		prev, cur := spans[i-1], spans[i]
		if gap, want := cur[0].Sub(prev[1]), 2*prev[1].Sub(prev[0]); gap < want {
			t.Fatalf("pass %d started %s after the previous one ended, want at least %s (Pace 2 × its duration)", i, gap, want)
		}
	}
}

// TestPokeIsNeverPaced: a Poke after a long pass runs the next pass after
// the settle alone, even with a PokeCluster pending and a pace far longer;
// cluster pokes during the settle do not extend it.
func TestPokeIsNeverPaced(t *testing.T) {
	var l passLog
	s, n := runLoopWith(t, Options{Quiet: 50 * time.Millisecond, MaxDelay: 10 * time.Second, Pace: 100},
		l.timed(100*time.Millisecond))
	waitFor(t, n, 1)
	s.trigger.PokeCluster()
	asked := time.Now()
	s.trigger.Poke()
	for n.Load() < 2 {
		s.trigger.PokeCluster()
		if time.Since(asked) > 5*time.Second {
			t.Fatal("no pass within 5s of a Poke; the pace (10s) or the cluster's pokes held it")
		}
		time.Sleep(5 * time.Millisecond) // the stream of cluster pokes' period
	}
	if d := time.Since(asked); d > 2*time.Second {
		t.Fatalf("the pass a Poke asked for started %s after it, want about the quiet window (50ms)", d)
	}
}
