package daemon

import (
	"context"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/translate/objtest"
)

// BenchmarkCacheHeapPerPod syncs a node's cache over a real API server
// holding 1,000 Nodes and 10,000 pods with their IPInstances, and 10,000
// reserved addresses (records on no node, as many as the pods': the ratio
// of the scale runs at 50,000 pods and 100,000 records), and reports the
// live heap it holds per pod (heap-B/pod) once synced and collected:
// "daemon" with the daemon's options (cacheOptions), "all-records" with
// them but every IPInstance cached (no onANode selector), and "every-pod"
// with every pod cached and the Nodes and IPInstances untrimmed (the
// options the daemon had before it cached its node's pods alone), for
// comparison. One op is one cold sync of the cache.
func BenchmarkCacheHeapPerPod(b *testing.B) {
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		b.Fatalf("start envtest: %v", err)
	}
	b.Cleanup(func() { _ = env.Stop() })
	scheme, err := newScheme()
	if err != nil {
		b.Fatal(err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	cl := objtest.Cluster{Nodes: 1000, Pods: 10000, Reserved: 10000}
	start := time.Now()
	if err := cl.Create(context.Background(), k8s, true, 32); err != nil {
		b.Fatal(err)
	}
	b.Logf("created %d nodes, %d pods and their records, %d reservations in %s", cl.Nodes, cl.Pods, cl.Reserved,
		time.Since(start))
	everyPod := cache.Options{Scheme: scheme, DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: policyPodTransform}}}
	allRecords := cacheOptions("node-0", scheme)
	for obj, by := range allRecords.ByObject {
		if _, ok := obj.(*estuaryv1.IPInstance); ok {
			by.Label = nil
			allRecords.ByObject[obj] = by
		}
	}
	for _, c := range []struct {
		name string
		opts cache.Options
	}{{"daemon", cacheOptions("node-0", scheme)}, {"all-records", allRecords}, {"every-pod", everyPod}} {
		b.Run(c.name, func(b *testing.B) {
			var heap float64
			for b.Loop() {
				before := objtest.LiveHeap()
				ctx, cancel := context.WithCancel(context.Background())
				cc, err := cache.New(cfg, c.opts)
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range []client.Object{&corev1.Pod{}, &corev1.Node{}, &estuaryv1.IPInstance{},
					&estuaryv1.Network{}, &estuaryv1.Subnet{}} {
					if _, err := cc.GetInformer(ctx, o); err != nil {
						b.Fatal(err)
					}
				}
				done := make(chan struct{})
				go func() { defer close(done); _ = cc.Start(ctx) }()
				if !cc.WaitForCacheSync(ctx) {
					b.Fatal("cache not synced")
				}
				heap = float64(int64(objtest.LiveHeap())-int64(before)) / float64(cl.Pods)
				runtime.KeepAlive(cc)
				cancel()
				<-done
			}
			b.ReportMetric(heap, "heap-B/pod")
		})
	}
}
