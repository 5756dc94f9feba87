package podipam

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// writeCounter counts the manager's API writes by verb and kind, of
// IPInstances only those whose name (their address) starts with prefix:
// a new manager also settles records earlier tests left behind.
type writeCounter struct {
	prefix string
	mu     sync.Mutex
	n      map[string]int
}

func (w *writeCounter) add(verb string, obj client.Object) {
	if _, ok := obj.(*estuaryv1.IPInstance); ok && !strings.HasPrefix(obj.GetName(), w.prefix) {
		return
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
// kept. (Subnet status is written on a timer, not per pod.)
func TestAllocationIsOneRecordWritePerPod(t *testing.T) {
	const pods = 20
	overlay(t, "ov-writes", "10.97.0.0/24")
	ns := newNamespace(t, nil)
	w := &writeCounter{prefix: "10.97.0.", n: map[string]int{}}
	r, _ := startManagerWith(t, testManager{rc: cfg, client: w.wrap})
	eventually(t, "allocator rebuilt", func() error { return r.Ready() })
	rs := deployment(t, ns, "w", "a")
	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	for i := range pods {
		newPod(t, ns, fmt.Sprintf("w-a-%d", i), rs, retain, onNetwork("ov-writes"))
	}
	waitOwned(t, ns, "Deployment", "w", pods, estuaryv1.IPInstanceBound)
	fresh := w.take()
	for i := range pods {
		deletePod(t, podRef(ns, fmt.Sprintf("w-a-%d", i)))
	}
	waitOwned(t, ns, "Deployment", "w", pods, estuaryv1.IPInstanceRetained)
	w.take()
	rs2 := deployment(t, ns, "w", "b")
	for i := range pods {
		newPod(t, ns, fmt.Sprintf("w-b-%d", i), rs2, retain, onNetwork("ov-writes"))
	}
	waitOwned(t, ns, "Deployment", "w", pods, estuaryv1.IPInstanceBound)
	kept := w.take()
	t.Logf("writes for %d new pods: %v; for %d pods taking kept addresses: %v", pods, fresh, pods, kept)
	for name, got := range map[string]map[string]int{"new addresses": fresh, "kept addresses": kept} {
		verb := "create"
		if name == "kept addresses" {
			verb = "update"
		}
		if n := got[verb+" *v1.IPInstance"]; n != pods {
			t.Errorf("%s: %d IPInstance %ss for %d pods, want %d", name, n, verb, pods, pods)
		}
		for k, n := range got {
			if k != verb+" *v1.IPInstance" && k != "update *v1.Subnet" && k != "patch *v1.Subnet" && k != "update *v1.Network" && k != "patch *v1.Network" {
				t.Errorf("%s: %d unexpected writes %s", name, n, k)
			}
		}
	}
}
