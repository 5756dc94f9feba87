package podipam

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// laggingCache answers a list of IPInstances as a cache that is behind the
// API server would: one record not seen yet, one at an older version, and
// one deleted record still held.
type laggingCache struct {
	client.Client
	missing, stale string
	phantom        estuaryv1.IPInstance
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
// server holds even when the cache is behind it: a record the cache has
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
	r := &Reconciler{Client: laggingCache{Client: k8s, missing: z, stale: y, phantom: *phantom}, APIReader: k8s}

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
