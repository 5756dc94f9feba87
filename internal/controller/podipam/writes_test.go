package podipam

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// writeCounter counts the manager's API writes by verb and kind, of
// IPInstances and IPHistories only those whose name (their address)
// starts with prefix:
// a new manager also settles records earlier tests left behind.
type writeCounter struct {
	prefix string
	mu     sync.Mutex
	n      map[string]int
}

func (w *writeCounter) add(verb string, obj client.Object) {
	switch obj.(type) {
	case *estuaryv1.IPInstance, *estuaryv1.IPHistory:
		if !strings.HasPrefix(obj.GetName(), w.prefix) {
			return
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n[fmt.Sprintf("%s %T", verb, obj)]++
}

func (w *writeCounter) take() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.n
	w.n = map[string]int{}
	return out
}

func (w *writeCounter) wrap(c client.WithWatch) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			w.add("create", obj)
			return c.Create(ctx, obj, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			w.add("update", obj)
			return c.Update(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			w.add("patch", obj)
			return c.Patch(ctx, obj, p, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			w.add("delete", obj)
			return c.Delete(ctx, obj, opts...)
		},
	})
}

// The allocation path writes one IPInstance per pod and nothing else per
// pod: a create for a new address, an update for an address its workload
// kept. (Subnet status is written on a timer, not per pod.) The
// addresses' history is off here; history_test.go counts its writes.
func TestAllocationIsOneRecordWritePerPod(t *testing.T) {
	const pods = 20
	fresh, kept := churnWrites(t, "ov-writes", "10.97.0.0/24", "10.97.0.", pods, HistoryOptions{Off: true}, nil)
	t.Logf("writes for %d new pods: %v; for %d pods taking kept addresses: %v", pods, fresh, pods, kept)
	checkWritesPerPod(t, pods, fresh, kept, "*v1.IPInstance")
}

// churnWrites counts the manager's writes (history as hist says) while
// pods retaining pods of a Deployment run on a new overlay network of
// cidr (their addresses starting with prefix), go, and are followed by as
// many pods of a new ReplicaSet: the writes for the new addresses and for
// the kept ones. settle, when set, waits after each step (1: bound, 2:
// kept, 3: bound again) for what the manager writes in the background.
func churnWrites(t *testing.T, network, cidr, prefix string, pods int, hist HistoryOptions,
	settle func(recs []estuaryv1.IPInstance, step int)) (fresh, kept map[string]int) {
	t.Helper()
	if settle == nil {
		settle = func([]estuaryv1.IPInstance, int) {}
	}
	overlay(t, network, cidr)
	ns := newNamespace(t, nil)
	w := &writeCounter{prefix: prefix, n: map[string]int{}}
	r, _ := startManagerWith(t, testManager{rc: cfg, client: w.wrap, history: hist})
	eventually(t, "allocator rebuilt", func() error { return r.Ready() })
	rs := deployment(t, ns, "w", "a")
	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	for i := range pods {
		newPod(t, ns, fmt.Sprintf("w-a-%d", i), rs, retain, onNetwork(network))
	}
	recs := waitOwned(t, ns, "Deployment", "w", pods, estuaryv1.IPInstanceBound)
	settle(recs, 1)
	fresh = w.take()
	for i := range pods {
		deletePod(t, podRef(ns, fmt.Sprintf("w-a-%d", i)))
	}
	waitOwned(t, ns, "Deployment", "w", pods, estuaryv1.IPInstanceRetained)
	settle(recs, 2)
	w.take()
	rs2 := deployment(t, ns, "w", "b")
	for i := range pods {
		newPod(t, ns, fmt.Sprintf("w-b-%d", i), rs2, retain, onNetwork(network))
	}
	waitOwned(t, ns, "Deployment", "w", pods, estuaryv1.IPInstanceBound)
	settle(recs, 3)
	return fresh, w.take()
}

// checkWritesPerPod: the pods cost one write of each of kinds apiece, a
// create for new addresses, an update for kept ones, and nothing else but
// Subnet and Network status.
func checkWritesPerPod(t *testing.T, pods int, fresh, kept map[string]int, kinds ...string) {
	t.Helper()
	for name, got := range map[string]map[string]int{"new addresses": fresh, "kept addresses": kept} {
		verb := "create"
		if name == "kept addresses" {
			verb = "update"
		}
		allowed := []string{"update *v1.Subnet", "patch *v1.Subnet", "update *v1.Network", "patch *v1.Network"}
		for _, kind := range kinds {
			if n := got[verb+" "+kind]; n != pods {
				t.Errorf("%s: %d %s %ss for %d pods, want %d", name, n, strings.TrimPrefix(kind, "*v1."), verb, pods, pods)
			}
			allowed = append(allowed, verb+" "+kind)
		}
		for k, n := range got {
			if !slices.Contains(allowed, k) {
				t.Errorf("%s: %d unexpected writes %s", name, n, k)
			}
		}
	}
}
