package daemon

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// memEndpoints is an in-memory endpoint store and collector.
type memEndpoints struct {
	mu        sync.Mutex
	eps       []endpointstore.Endpoint
	collected []string
}

func (m *memEndpoints) List() ([]endpointstore.Endpoint, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.eps), nil
}

func (m *memEndpoints) Collect(_ context.Context, k endpointstore.Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.eps = slices.DeleteFunc(m.eps, func(ep endpointstore.Endpoint) bool { return ep.Key == k })
	m.collected = append(m.collected, k.ContainerID)
	return nil
}

// TestNodeGCCollectsOnlyGonePodsAfterGrace runs the node GC against a real
// API server, reading IPInstances only: an endpoint whose network
// namespace is gone and whose addresses are no longer recorded for its pod
// (no record, a record of another pod of the name, a Retained one, or one
// of another name) goes after the grace; a running pod's (its namespace
// exists, even when its records are gone), one whose pod still holds an
// address (its namespace unseen), a young endpoint and one that names no
// pod or no namespace stay.
func TestNodeGCCollectsOnlyGonePodsAfterGrace(t *testing.T) {
	_, k8s, stop, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	ctx := context.Background()
	record := func(ip, pod, uid string, phase estuaryv1.IPInstancePhase) {
		a := netip.MustParsePrefix(ip)
		ipi := &estuaryv1.IPInstance{ObjectMeta: metav1.ObjectMeta{Name: estuaryv1.InstanceName(a.Addr())},
			Spec: estuaryv1.IPInstanceSpec{Network: "overlay", Subnet: "overlay-v4", Address: estuaryv1.InstanceAddress{IP: ip, Version: 4},
				Binding: estuaryv1.Binding{Namespace: "default", PodName: pod, PodUID: uid, NodeName: "node-a",
					Owner: estuaryv1.OwnerReference{Kind: "Pod", Name: pod, UID: uid}}},
			Status: estuaryv1.IPInstanceStatus{Phase: phase}}
		if err := k8s.Create(ctx, ipi); err != nil {
			t.Fatal(err)
		}
	}
	record("10.0.0.2/24", "live", "uid-live", estuaryv1.IPInstanceBound)
	record("10.0.0.3/24", "held", "uid-held", estuaryv1.IPInstanceBound)
	record("10.0.0.4/24", "again", "uid-of-the-new-pod", estuaryv1.IPInstanceBound)
	record("10.0.0.5/24", "kept", "", estuaryv1.IPInstanceRetained)
	record("10.0.0.6/24", "other", "uid-other", estuaryv1.IPInstanceBound)
	record("10.0.0.9/24", "dual", "uid-dual", estuaryv1.IPInstanceBound)

	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	old := now.Add(-time.Hour)
	const alive = "/proc/self/ns/net"
	dead := filepath.Join(t.TempDir(), "cni-gone")
	emptyFile := filepath.Join(t.TempDir(), "cni-half-removed")
	if err := os.WriteFile(emptyFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ep := func(id, pod, uid, netns string, created time.Time, ips ...string) endpointstore.Endpoint {
		return endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: id, IfName: "eth0"}, Netns: netns, PodNamespace: "default",
			PodName: pod, PodUID: uid, IPs: ips, Created: created}
	}
	m := &memEndpoints{eps: []endpointstore.Endpoint{
		ep("live", "live", "uid-live", alive, old, "10.0.0.2/32"),
		ep("records-lost", "lost", "uid-lost", alive, old, "10.0.0.7/32"),
		ep("held", "held", "uid-held", dead, old, "10.0.0.3/32"),
		ep("dual", "dual", "uid-dual", dead, old, "10.0.0.8/32", "10.0.0.9/32"),
		ep("deleted", "gone", "uid-gone", dead, old, "10.0.0.10/32"),
		ep("replaced", "again", "uid-of-an-earlier-pod", dead, old, "10.0.0.4/32"),
		ep("retained", "kept", "uid-kept", emptyFile, old, "10.0.0.5/32"),
		ep("readdressed", "mine", "uid-mine", dead, old, "10.0.0.6/32"),
		ep("young", "gone-too", "uid-young", dead, now.Add(-30*time.Second), "10.0.0.11/32"),
		ep("nameless", "", "", dead, old, "10.0.0.12/32"),
		ep("no-netns", "gone-3", "uid-3", "", old, "10.0.0.13/32"),
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
	if n, err := g.pass(ctx); err != nil || n != 4 {
		t.Fatalf("after the grace collected %d (%v), want 4", n, err)
	}
	slices.Sort(m.collected)
	if want := []string{"deleted", "readdressed", "replaced", "retained"}; !slices.Equal(m.collected, want) {
		t.Errorf("collected %v, want %v", m.collected, want)
	}
	left, _ := m.List()
	var ids []string
	for _, e := range left {
		ids = append(ids, e.ContainerID)
	}
	if want := []string{"live", "records-lost", "held", "dual", "young", "nameless", "no-netns"}; !slices.Equal(ids, want) {
		t.Errorf("endpoints left %v, want %v", ids, want)
	}
	// A pod that comes back (the same UID seen again) resets its clock.
	if _, ok := g.missing[endpointstore.Key{ContainerID: "live", IfName: "eth0"}]; ok {
		t.Error("a live pod's endpoint is counted as missing")
	}
}

// netnsGone: a path holding a namespace is not gone; a missing path, or a
// file no namespace is mounted on, is.
func TestNetnsGone(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{"/proc/self/ns/net": false, empty: true, filepath.Join(t.TempDir(), "missing"): true} {
		if got, err := netnsGone(path); err != nil || got != want {
			t.Errorf("netnsGone(%s) = %t, %v; want %t", path, got, err, want)
		}
	}
}
