package dataplane

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/state"
)

func TestRunFollowsDesiredState(t *testing.T) {
	h, _ := node(t)
	r := NewReconciler(h, state.DefaultOwnership())
	route := state.Route{Table: 1000, Dst: pfx("10.1.0.9/32"), Dev: "est1", Scope: state.ScopeLink,
		Type: state.RouteUnicast, Protocol: state.ProtocolEstuary}

	var mu sync.Mutex
	var want state.State
	desired := func() state.State {
		mu.Lock()
		defer mu.Unlock()
		return want
	}
	trigger := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Run(ctx, desired, trigger, 0, func(err error) { t.Errorf("reconcile: %v", err) })
	}()
	defer func() { cancel(); <-done }()

	mu.Lock()
	want = state.State{Routes: []state.Route{route}}
	mu.Unlock()
	trigger <- struct{}{}
	waitFor(t, func() bool { return slices.Contains(read(t, h).Routes, route) })

	mu.Lock()
	want = state.State{}
	mu.Unlock()
	trigger <- struct{}{}
	waitFor(t, func() bool { return !slices.Contains(read(t, h).Routes, route) })
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
