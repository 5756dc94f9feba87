package daemon

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/estuary-cni/estuary/internal/cniserver/store"
	"github.com/estuary-cni/estuary/internal/testenv"
)

// memEndpoints is an in-memory endpoint store and collector.
type memEndpoints struct {
	mu        sync.Mutex
	eps       []store.Endpoint
	collected []string
}

func (m *memEndpoints) List() ([]store.Endpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.eps), nil
}

func (m *memEndpoints) Collect(_ context.Context, k store.Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.eps = slices.DeleteFunc(m.eps, func(ep store.Endpoint) bool { return ep.Key == k })
	m.collected = append(m.collected, k.ContainerID)
	return nil
}

// TestNodeGCCollectsOnlyGonePodsAfterGrace runs the node GC against a real
// API server: the endpoint of a deleted pod, and of a pod replaced by
// another of the same name, go after the grace; a live pod's, a young
// endpoint's and one that names no pod stay.
func TestNodeGCCollectsOnlyGonePodsAfterGrace(t *testing.T) {
	_, k8s, stop, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	ctx := context.Background()
	live := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "live"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}}}
	renamed := live.DeepCopy()
	renamed.Name = "again"
	for _, p := range []*corev1.Pod{live, renamed} {
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	old := now.Add(-time.Hour)
	ep := func(id, pod, uid string, created time.Time) store.Endpoint {
		return store.Endpoint{Key: store.Key{ContainerID: id, IfName: "eth0"}, PodNamespace: "default", PodName: pod, PodUID: uid, Created: created}
	}
	m := &memEndpoints{eps: []store.Endpoint{
		ep("live", "live", string(live.UID), old),
		ep("deleted", "gone", "uid-gone", old),
		ep("replaced", "again", "uid-of-an-earlier-pod", old),
		ep("young", "gone-too", "uid-young", now.Add(-30*time.Second)),
		ep("nameless", "", "", old),
	}}
	g := newNodeGC(m, m, k8s, 2*time.Minute)
	g.now = func() time.Time { return now }
	if n, err := g.pass(ctx); err != nil || n != 0 {
		t.Fatalf("first pass collected %d (%v); a pod seen gone once is not collected yet", n, err)
	}
	now = now.Add(time.Minute)
	if n, _ := g.pass(ctx); n != 0 {
		t.Fatalf("collected %d before the grace passed", n)
	}
	now = now.Add(2 * time.Minute)
	if n, err := g.pass(ctx); err != nil || n != 2 {
		t.Fatalf("after the grace collected %d (%v), want 2", n, err)
	}
	slices.Sort(m.collected)
	if !slices.Equal(m.collected, []string{"deleted", "replaced"}) {
		t.Errorf("collected %v, want deleted and replaced", m.collected)
	}
	left, _ := m.List()
	var ids []string
	for _, e := range left {
		ids = append(ids, e.ContainerID)
	}
	if !slices.Equal(ids, []string{"live", "young", "nameless"}) {
		t.Errorf("endpoints left %v", ids)
	}
	// A pod that comes back (the same UID seen again) resets its clock.
	if _, ok := g.missing[store.Key{ContainerID: "live", IfName: "eth0"}]; ok {
		t.Error("a live pod's endpoint is counted as missing")
	}
}
