package podipam

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/estuary-cni/estuary/pkg/ipam"
)

// readiness gates every reconcile on the rebuild: nothing is allocated,
// released or changed in the allocator until its state has been restored
// from the records (see fence.go).
type readiness struct {
	once sync.Once
	done chan struct{}
	err  error
}

func (r *readiness) init() {
	r.once.Do(func() { r.done = make(chan struct{}) })
}

func (r *readiness) wait(ctx context.Context) error {
	r.init()
	select {
	case <-r.done:
		return r.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for the allocator to be rebuilt: %w", ctx.Err())
	}
}

func (r *readiness) finish(err error) {
	r.init()
	r.err = err
	close(r.done)
}

// Ready reports whether the rebuild has finished (for the readiness probe).
func (r *Reconciler) Ready() error {
	return r.ready.check()
}

// check is nil once the rebuild has finished well.
func (r *readiness) check() error {
	r.init()
	select {
	case <-r.done:
		return r.err
	default:
		return errors.New("allocator not rebuilt yet")
	}
}

// rebuilder restores the allocator and the holdings from the API server
// once this manager leads; every other part waits for it (readiness).
type rebuilder struct {
	topo    *Topology
	records *recordReader
	alloc   Allocator
	held    *holdings
	metrics *Metrics
	ready   *readiness
}

// Start restores the allocator from the API server: every Network and
// Subnet read live, then every IPInstance, read from the informer cache
// once a fence proved it current (fence.go). It runs once this manager
// leads (controller-runtime starts it after winning the election) and
// unblocks the reconcilers when done.
func (b *rebuilder) Start(ctx context.Context) error {
	err := b.rebuild(ctx)
	b.ready.finish(err)
	if err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// NeedLeaderElection returns true: only the leader rebuilds and allocates.
func (b *rebuilder) NeedLeaderElection() bool { return true }

// rebuildBackoff spaces the attempts of a rebuild whose reads fail.
var rebuildBackoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: math.MaxInt32, Cap: 30 * time.Second}

// rebuild restores the allocator, trying again until its reads succeed or
// ctx ends. It fails closed: until the networks, the subnets and every
// record have been read, nothing is allocated (the reconcilers wait on
// readiness), and a subnet that cannot be installed stays out of the
// allocator (see Topology).
func (b *rebuilder) rebuild(ctx context.Context) error {
	logger := log.FromContext(ctx)
	var read fenced
	err := wait.ExponentialBackoffWithContext(ctx, rebuildBackoff, func(ctx context.Context) (bool, error) {
		notInstalled, err := b.topo.load(ctx)
		if err == nil {
			read, err = b.records.readRecords(ctx)
		}
		if err != nil {
			b.metrics.rebuildFailures.Inc()
			logger.Error(err, "rebuild: reading the cluster's state failed; nothing is allocated until it succeeds")
			return false, nil
		}
		for _, e := range notInstalled {
			logger.Error(e, "rebuild: subnet not installed; nothing is allocated from it until it is")
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("rebuild: %w", err)
	}
	records := make([]ipam.Record, 0, len(read.items))
	for i := range read.items {
		rec, err := record(&read.items[i])
		if err != nil {
			logger.Error(err, "rebuild: skipping unreadable record")
			continue
		}
		records = append(records, rec)
	}
	if err := b.alloc.Rebuild(records); err != nil {
		var rb *ipam.RebuildError
		if !errors.As(err, &rb) {
			return fmt.Errorf("rebuild the allocator: %w", err)
		}
		// Problems are reported, never resolved silently: every address that
		// could be placed stays held, so none is handed out twice.
		for _, p := range rb.Problems {
			logger.Error(p, "rebuild: conflicting or unplaceable record")
		}
		b.metrics.rebuildProblems.Add(float64(len(rb.Problems)))
	}
	for key, hs := range fromInstances(read.items) {
		b.held.set(key, hs)
	}
	logger.Info("allocator rebuilt", "records", len(records), "fence", read.by, "readLive", read.live,
		"subnets", len(b.alloc.Subnets()))
	return nil
}
