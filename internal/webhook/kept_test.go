package webhook

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
)

// TestKeptForWorkloadReadsALaggingCacheAgainLive: the first pod of a
// re-created Deployment names a ReplicaSet the cache has not seen yet. The
// cache alone takes the pod for its own workload, which keeps nothing; the
// owners read again live find the Deployment and the address it keeps.
// Without a live reader, or with a ReplicaSet that is nowhere, the pod is
// its own workload.
func TestKeptForWorkloadReadsALaggingCacheAgainLive(t *testing.T) {
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "keep", UID: "u-keep"}}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "keep-1", UID: "u-rs",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "keep", UID: "u-keep", Controller: ptr.To(true)}}}}
	kept := &estuaryv1.IPInstance{ObjectMeta: metav1.ObjectMeta{Name: "10-78-1-96"},
		Spec: estuaryv1.IPInstanceSpec{Address: estuaryv1.InstanceAddress{Version: 4},
			Binding: estuaryv1.Binding{Namespace: "ns", Owner: estuaryv1.OwnerReference{Kind: "Deployment", Name: "keep", UID: "u-keep"}}},
		Status: estuaryv1.IPInstanceStatus{Phase: estuaryv1.IPInstanceRetained}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "keep-1-a",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "keep-1", UID: "u-rs", Controller: ptr.To(true)}}}}
	lagging := stale(t, deploy, kept)
	live := stale(t, deploy, rs, kept)
	v4 := []family.Family{family.IPv4}
	for _, c := range []struct {
		name         string
		cached, live client.Reader
		want         bool
	}{
		{"the cache has the ReplicaSet", live, nil, true},
		{"the cache lags, read again live", lagging, live, true},
		{"the cache lags, no live reader", lagging, nil, false},
		{"the ReplicaSet is nowhere", lagging, lagging, false},
	} {
		got, err := keptForWorkload(t.Context(), c.cached, c.live, "ns", pod, v4)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want {
			t.Errorf("%s: kept = %v, want %v", c.name, got, c.want)
		}
	}
}
