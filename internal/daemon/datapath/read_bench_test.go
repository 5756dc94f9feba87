package datapath

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/estuary-cni/estuary/internal/daemon/translate"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// BenchmarkReadPass50k is one pass's read of the cache and the neighbour
// table it feeds, over a real API server holding 1,000 Nodes and 50,000
// Bound IPInstances (no pods: the read does not list them). It reports the
// cache's live heap per IPInstance after its sync (heap-B/record).
func BenchmarkReadPass50k(b *testing.B) {
	cfg, k8s, _, scheme := startEnvConfig(b)
	cl := objtest.Cluster{Nodes: 1000, Pods: 50000}
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	start := time.Now()
	if err := cl.Create(ctx, k8s, false, 32); err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d nodes and %d records in %s", cl.Nodes, cl.Pods, time.Since(start))
	before := objtest.LiveHeap()
	c, err := cache.New(cfg, cache.Options{Scheme: scheme, DefaultTransform: cache.TransformStripManagedFields()})
	if err != nil {
		b.Fatal(err)
	}
	records := recordsCache(b, cfg, "node-0")
	s, err := New(ctx, Options{Node: "node-0", Log: logr.Discard()}, c, records, &fakeEndpoints{}, NewTrigger())
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	go func() { _ = records.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) || !records.WaitForCacheSync(ctx) {
		b.Fatal("cache not synced")
	}
	heap := float64(objtest.LiveHeap()-before) / float64(cl.Pods)
	b.ReportAllocs()
	for b.Loop() {
		snap, err := s.read(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if n := len(translate.NeighTable("node-0", snap.Objects)); n < cl.Pods*99/100 {
			b.Fatalf("neighbour table of %d entries, want about %d", n, cl.Pods)
		}
	}
	b.ReportMetric(heap, "heap-B/record")
}
