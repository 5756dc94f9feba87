package daemon

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/remote"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// BenchmarkCacheHeapPerPod syncs a node's caches over a real API server
// holding 1,000 Nodes and 10,000 pods with their IPInstances, and 10,000
// reserved addresses (records on no node, as many as the pods': the ratio
// of the scale runs at 50,000 pods and 100,000 records), and reports the
// live heap they hold per pod (heap-B/pod) once synced and collected:
// "daemon" with the daemon's caches (cacheOptions, and other nodes'
// records as remote.Records, remote.CacheOptions); "trimmed-ipinstances"
// with one cache holding every record on a node as a trimmed
// estuaryv1.IPInstance (trimmedRecord: the daemon's cache before
// remote.Record); "every-pod" with every pod cached and the Nodes and
// IPInstances untrimmed (the options the daemon had before it cached its
// node's pods alone). One op is one cold sync of the caches.
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
	daemon, err := cacheOptions("node-0", scheme)
	if err != nil {
		b.Fatal(err)
	}
	records, err := remote.CacheOptions("node-0")
	if err != nil {
		b.Fatal(err)
	}
	trimmed, _ := cacheOptions("node-0", scheme)
	for obj := range trimmed.ByObject {
		if _, ok := obj.(*estuaryv1.IPInstance); ok {
			trimmed.ByObject[obj] = cache.ByObject{Label: onANode(b), Transform: trimmedRecord("node-0")}
		}
	}
	everyPod := cache.Options{Scheme: scheme, DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: policyPodTransform}}}
	typed := []client.Object{&corev1.Pod{}, &corev1.Node{}, &estuaryv1.IPInstance{}, &estuaryv1.Network{}, &estuaryv1.Subnet{}}
	for _, c := range []struct {
		name   string
		caches []cachedKinds
	}{
		{"daemon", []cachedKinds{{daemon, typed}, {records, []client.Object{&remote.Record{}}}}},
		{"trimmed-ipinstances", []cachedKinds{{trimmed, typed}}},
		{"every-pod", []cachedKinds{{everyPod, typed}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var heap float64
			for b.Loop() {
				before := objtest.LiveHeap()
				ctx, cancel := context.WithCancel(context.Background())
				stop := syncCaches(ctx, b, cfg, c.caches)
				heap = float64(int64(objtest.LiveHeap())-int64(before)) / float64(cl.Pods)
				cancel()
				stop()
			}
			b.ReportMetric(heap, "heap-B/pod")
		})
	}
}

// cachedKinds are a cache's options and the kinds it is to cache.
type cachedKinds struct {
	opts  cache.Options
	kinds []client.Object
}

// syncCaches starts a cache of each of caches and waits for them to sync;
// stop waits for them to end once ctx is.
func syncCaches(ctx context.Context, b *testing.B, cfg *rest.Config, caches []cachedKinds) (stop func()) {
	var wg sync.WaitGroup
	for _, ck := range caches {
		cc, err := cache.New(cfg, ck.opts)
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range ck.kinds {
			if _, err := cc.GetInformer(ctx, o); err != nil {
				b.Fatal(err)
			}
		}
		wg.Go(func() { _ = cc.Start(ctx) })
		if !cc.WaitForCacheSync(ctx) {
			b.Fatal("cache not synced")
		}
	}
	return wg.Wait
}

// onANode selects the records labelled with a node.
func onANode(b *testing.B) labels.Selector {
	req, err := labels.NewRequirement(estuaryv1.LabelNode, selection.Exists, nil)
	if err != nil {
		b.Fatal(err)
	}
	return labels.NewSelector().Add(*req)
}

// trimmedRecord is how the daemon's cache kept records before
// remote.Record: this node's whole, the others' as an IPInstance with
// their name, version, node label (one map a node), address and phase.
func trimmedRecord(node string) toolscache.TransformFunc {
	byNode := map[string]map[string]string{}
	var mu sync.Mutex
	return func(obj any) (any, error) {
		ipi, ok := obj.(*estuaryv1.IPInstance)
		if !ok {
			return obj, nil
		}
		ipi.ManagedFields = nil
		n := ipi.Labels[estuaryv1.LabelNode]
		if n == node {
			return ipi, nil
		}
		mu.Lock()
		defer mu.Unlock()
		if byNode[n] == nil {
			byNode[n] = map[string]string{estuaryv1.LabelNode: n}
		}
		out := &estuaryv1.IPInstance{TypeMeta: ipi.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: ipi.Name,
			ResourceVersion: ipi.ResourceVersion, Labels: byNode[n]}}
		out.Spec.Address.IP, out.Status.Phase = ipi.Spec.Address.IP, ipi.Status.Phase
		return out, nil
	}
}
