package podipam

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// laggingCache answers a list of IPInstances as a cache that is behind the
// API server would: one record not seen yet, one at an older version, and
// one deleted record still held; and it never shows a write (every record
// it is asked for is at version 1), so the rebuild's fence by a write gives
// up and fences with a live list.
type laggingCache struct {
	client.Client
	missing, stale string
	phantom        estuaryv1.IPInstance
}

func (c laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := c.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if _, ok := obj.(*estuaryv1.IPInstance); ok {
		obj.SetResourceVersion("1")
	}
	return nil
}

func (c laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l, ok := list.(*estuaryv1.IPInstanceList)
	if !ok {
		return c.Client.List(ctx, list, opts...)
	}
	if err := c.Client.List(ctx, l); err != nil {
		return err
	}
	l.Items = slices.DeleteFunc(l.Items, func(ipi estuaryv1.IPInstance) bool { return ipi.Name == c.missing })
	for i := range l.Items {
		if l.Items[i].Name == c.stale {
			l.Items[i].ResourceVersion = "1"
			l.Items[i].Spec.Binding.Owner.Name = "an-older-owner"
		}
	}
	l.Items = append(l.Items, c.phantom)
	return nil
}

// TestRebuildReadsPastALaggingCache: the rebuild's records are what the API
// server holds even when the cache is behind it and does not show the
// fence's write: a record the cache has
// not seen is read, one it holds at an older version is read at the
// current one, and one it holds that the API server deleted is left out;
// only those three are read live. When more names differ than Gets are
// worth, every record is read with one live list instead.
func TestRebuildReadsPastALaggingCache(t *testing.T) {
	overlay(t, "ov-fence", "10.99.0.0/24")
	ns := newNamespace(t, nil)
	for _, p := range []string{"10.99.0.10/24", "10.99.0.11/24", "10.99.0.12/24"} {
		reserve(t, ns, "ov-fence", p, "Deployment", "web")
	}
	name := func(a string) string { return estuaryv1.InstanceName(netip.MustParseAddr(a)) }
	x, y, z, w := name("10.99.0.10"), name("10.99.0.11"), name("10.99.0.12"), name("10.99.0.13")
	var current estuaryv1.IPInstance
	if err := k8s.Get(bg(), client.ObjectKey{Name: y}, &current); err != nil {
		t.Fatal(err)
	}
	phantom := current.DeepCopy()
	phantom.Name, phantom.ResourceVersion, phantom.Spec.Address.IP = w, "1", "10.99.0.13/24"
	r := &recordReader{cache: laggingCache{Client: k8s, missing: z, stale: y, phantom: *phantom}, live: k8s}
	defer func(d time.Duration) { fenceWait = d }(fenceWait)
	fenceWait = 100 * time.Millisecond

	check := func(t *testing.T, read fenced, wantLive int) {
		t.Helper()
		got := map[string]estuaryv1.IPInstance{}
		for _, ipi := range read.items {
			got[ipi.Name] = ipi
		}
		for _, n := range []string{x, y, z} {
			if _, ok := got[n]; !ok {
				t.Errorf("record %s is missing from the rebuild's records", n)
			}
		}
		if _, ok := got[w]; ok {
			t.Errorf("record %s, deleted from the API server, is in the rebuild's records", w)
		}
		if g := got[y]; g.ResourceVersion != current.ResourceVersion || g.Spec.Binding.Owner.Name != "web" {
			t.Errorf("record %s at version %s owned by %q; want the current version %s owned by web",
				y, g.ResourceVersion, g.Spec.Binding.Owner.Name, current.ResourceVersion)
		}
		if read.live != wantLive {
			t.Errorf("%d records read live, want %d", read.live, wantLive)
		}
	}
	t.Run("gets", func(t *testing.T) {
		read, err := r.readRecords(bg())
		if err != nil {
			t.Fatal(err)
		}
		check(t, read, 3)
	})
	t.Run("one live list", func(t *testing.T) {
		defer func(n int) { maxFenceGets = n }(maxFenceGets)
		maxFenceGets = 2
		read, err := r.readRecords(bg())
		if err != nil {
			t.Fatal(err)
		}
		check(t, read, len(read.items))
	})
}

// frozenCache is an informer cache stopped at one moment, as a cache that
// is behind the API server is: it serves the IPInstances it held then
// (snapshot) until thawed, and the live cache after; writes go to the API
// server.
type frozenCache struct {
	client.Client
	snapshot map[string]estuaryv1.IPInstance
	thawed   *atomic.Bool
}

func (c frozenCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	ipi, ok := obj.(*estuaryv1.IPInstance)
	if !ok || c.thawed.Load() {
		return c.Client.Get(ctx, key, obj, opts...)
	}
	s, held := c.snapshot[key.Name]
	if !held {
		return apierrors.NewNotFound(estuaryv1.GroupVersion.WithResource("ipinstances").GroupResource(), key.Name)
	}
	s.DeepCopyInto(ipi)
	return nil
}

func (c frozenCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l, ok := list.(*estuaryv1.IPInstanceList)
	if !ok || c.thawed.Load() {
		return c.Client.List(ctx, list, opts...)
	}
	l.Items = nil
	for _, ipi := range c.snapshot {
		l.Items = append(l.Items, *ipi.DeepCopy())
	}
	return nil
}

// TestRebuildFencesTheCacheWithAWrite reads the records through a real
// informer cache that stops at one moment while a record is created after
// it: when the cache goes on and shows the fence's write, the records come
// from it alone and hold the new one, and the first record by name carries
// the fence; when it never shows the write, the rebuild fences it with a
// live list and holds the new record all the same.
func TestRebuildFencesTheCacheWithAWrite(t *testing.T) {
	overlay(t, "ov-write-fence", "10.98.0.0/24")
	ns := newNamespace(t, nil)
	reserve(t, ns, "ov-write-fence", "10.98.0.10/24", "Deployment", "web")
	ctx, cancel := context.WithCancel(bg())
	defer cancel()
	informers, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := informers.GetInformer(ctx, &estuaryv1.IPInstance{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = informers.Start(ctx) }()
	if !informers.WaitForCacheSync(ctx) {
		t.Fatal("cache not synced")
	}
	cached, err := client.New(cfg, client.Options{Scheme: scheme, Cache: &client.CacheOptions{Reader: informers}})
	if err != nil {
		t.Fatal(err)
	}
	freeze := func(t *testing.T) frozenCache {
		t.Helper()
		var list estuaryv1.IPInstanceList
		if err := cached.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		snap := map[string]estuaryv1.IPInstance{}
		for _, ipi := range list.Items {
			snap[ipi.Name] = ipi
		}
		return frozenCache{Client: cached, snapshot: snap, thawed: &atomic.Bool{}}
	}
	has := func(t *testing.T, read fenced, name string) {
		t.Helper()
		if !slices.ContainsFunc(read.items, func(ipi estuaryv1.IPInstance) bool { return ipi.Name == name }) {
			t.Errorf("record %s, created while the cache was stopped, is missing from the rebuild's records", name)
		}
	}
	t.Run("the cache shows the write", func(t *testing.T) {
		frozen := freeze(t)
		reserve(t, ns, "ov-write-fence", "10.98.0.11/24", "Deployment", "web")
		created := estuaryv1.InstanceName(netip.MustParseAddr("10.98.0.11"))
		time.AfterFunc(200*time.Millisecond, func() { frozen.thawed.Store(true) })
		read, err := (&recordReader{cache: frozen, live: k8s}).readRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		has(t, read, created)
		if read.live != 0 || read.by != "write" {
			t.Errorf("%d records read live, fence %q; want none, by a write: the cache showed it", read.live, read.by)
		}
		first := slices.MinFunc(read.items, func(a, b estuaryv1.IPInstance) int { return strings.Compare(a.Name, b.Name) })
		var live estuaryv1.IPInstance
		if err := k8s.Get(ctx, client.ObjectKey{Name: first.Name}, &live); err != nil || live.Annotations[estuaryv1.AnnotationFence] == "" {
			t.Errorf("record %s (the first by name) carries no fence: %v, %v", first.Name, live.Annotations, err)
		}
	})
	t.Run("the cache never shows it", func(t *testing.T) {
		defer func(d time.Duration) { fenceWait = d }(fenceWait)
		fenceWait = 300 * time.Millisecond
		frozen := freeze(t)
		reserve(t, ns, "ov-write-fence", "10.98.0.12/24", "Deployment", "web")
		created := estuaryv1.InstanceName(netip.MustParseAddr("10.98.0.12"))
		read, err := (&recordReader{cache: frozen, live: k8s}).readRecords(ctx)
		if err != nil {
			t.Fatal(err)
		}
		has(t, read, created)
		if read.live == 0 || read.by != "list" {
			t.Errorf("%d records read live, fence %q: the rebuild trusted a cache that never showed its write", read.live, read.by)
		}
	})
}
