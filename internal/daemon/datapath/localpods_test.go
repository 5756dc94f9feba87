package datapath

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/go-logr/logr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// fakeLocalPods counts the passes that reconcile table 1000 and fails the
// first.
type fakeLocalPods struct {
	mu     sync.Mutex
	passes int
}

func (f *fakeLocalPods) Reconcile(context.Context) (desired.Plan, []endpointstore.Key, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.passes++
	if f.passes == 1 {
		return desired.Plan{}, nil, errors.New("injected local-pods failure")
	}
	return desired.Plan{}, nil, nil
}

func (f *fakeLocalPods) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.passes
}

// TestSyncerReconcilesLocalPodsEveryPass: table 1000 is part of every pass,
// a failure of it is retried, and it never keeps the overlay from being
// applied.
func TestSyncerReconcilesLocalPodsEveryPass(t *testing.T) {
	k8s, c, _ := startEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dp, local := &fakeDataplane{}, &fakeLocalPods{}
	s := newTestLoop(ctx, t, testOptions{Node: "node-a", Port: 8472, Log: logr.Discard(), LocalPods: local}, dp, c, k8s, &fakeEndpoints{})
	go func() { _ = c.Start(ctx) }()
	go func() { _ = s.Run(ctx) }()
	a := objtest.Node("node-a", "", "", "10.77.0.11")
	ovl := objtest.Network("overlay", estuaryv1.NetworkTypeOverlay, 4)
	create(t, k8s, &a, &ovl)
	eventually(t, "the overlay applied although the first local-pods pass failed", func() error {
		dp.mu.Lock()
		defer dp.mu.Unlock()
		if len(dp.inputs) == 0 {
			return errors.New("no overlay input applied yet")
		}
		return nil
	})
	eventually(t, "the failed local-pods pass retried", func() error {
		if n := local.count(); n < 2 {
			return errors.New("local pods reconciled once")
		}
		return nil
	})
}
