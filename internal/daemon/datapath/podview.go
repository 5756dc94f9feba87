package datapath

// The cluster's pods. Policy reads every pod of the cluster as a peer, but
// only while some policy exists: without one, the node's table holds no
// rule and a pass reads the pods of its own endpoints alone (the daemon's
// cache watches only the pods of its node). PodView is the view of every
// pod that the policy part starts on the first pass that finds a policy,
// and stops once none has been found for Linger (so a policy deleted and
// created again does not cost every node a list of every pod each time).
//
// The part never computes policy from a view that has not synced: a pass
// that finds a policy waits up to SyncTimeout for the view, and fails the
// policy part when it has not synced by then, leaving the table as it was;
// the view's sync pokes the trigger for the pass that computes it. Every
// add and delete of a pod in the view, and every update that
// changesPolicy, pokes the trigger too, as the policy watch does.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Defaults of PodView's SyncTimeout and Linger.
const (
	DefaultPodSyncTimeout = 10 * time.Second
	DefaultPodLinger      = 2 * time.Minute
)

// PodView is a cache of every pod of the cluster, run only while policy
// needs it. Its zero value is not usable: see NewPodView.
type PodView struct {
	// SyncTimeout bounds a pass's wait for the view to sync
	// (DefaultPodSyncTimeout); Linger is how long the view outlives the
	// last policy (DefaultPodLinger).
	SyncTimeout time.Duration
	Linger      time.Duration

	base     context.Context
	newCache func() (cache.Cache, error)
	trigger  *Trigger

	mu       sync.Mutex
	c        cache.Cache
	stop     context.CancelFunc
	synced   bool
	unneeded time.Time // when a pass first found no policy; zero while one exists
}

// NewPodView returns a view, not running, whose cache newCache builds
// (it must cache Pods; the view starts and stops it) and whose events poke
// t. ctx bounds the life of every cache it runs.
func NewPodView(ctx context.Context, newCache func() (cache.Cache, error), t *Trigger) *PodView {
	return &PodView{SyncTimeout: DefaultPodSyncTimeout, Linger: DefaultPodLinger, base: ctx, newCache: newCache, trigger: t}
}

// Reader returns the view once it has synced, starting it if it is not
// running. It waits at most SyncTimeout (and no longer than ctx) and
// fails when the view has not synced by then.
func (v *PodView) Reader(ctx context.Context) (client.Reader, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.unneeded = time.Time{}
	if v.c == nil {
		if err := v.start(); err != nil {
			return nil, err
		}
	}
	if !v.synced {
		wait, cancel := context.WithTimeout(ctx, v.SyncTimeout)
		defer cancel()
		if !v.c.WaitForCacheSync(wait) {
			return nil, fmt.Errorf("every pod of the cluster not synced within %s: policy not computed: %w",
				v.SyncTimeout, errors.Join(wait.Err(), ctx.Err()))
		}
		v.synced = true
	}
	return v.c, nil
}

// start builds the cache, registers the policy triggers with its pod
// informer and runs it; it pokes the trigger once the cache has synced.
func (v *PodView) start() error {
	c, err := v.newCache()
	if err != nil {
		return fmt.Errorf("cache of every pod: %w", err)
	}
	ctx, stop := context.WithCancel(v.base)
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err == nil {
		_, err = inf.AddEventHandler(v.trigger.handler(changesPolicy))
	}
	if err != nil {
		stop()
		return fmt.Errorf("watch every pod: %w", err)
	}
	go func() { _ = c.Start(ctx) }()
	go func() {
		if c.WaitForCacheSync(ctx) {
			v.trigger.Poke()
		}
	}()
	v.c, v.stop, v.synced = c, stop, false
	return nil
}

// Unneeded tells the view that a pass found no policy; the view stops once
// that has held for Linger.
func (v *PodView) Unneeded(now time.Time) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.c == nil {
		return
	}
	if v.unneeded.IsZero() {
		v.unneeded = now
	}
	if now.Sub(v.unneeded) >= v.Linger {
		v.release()
	}
}

// Running reports whether the view's cache is running.
func (v *PodView) Running() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.c != nil
}

// Stop stops the view's cache, if it runs.
func (v *PodView) Stop() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.release()
}

func (v *PodView) release() {
	if v.stop != nil {
		v.stop()
	}
	v.c, v.stop, v.synced, v.unneeded = nil, nil, false, time.Time{}
}
