package webhook

import (
	"context"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// stale returns a reader holding objs with the handlers' indexes, standing
// in for a cache that has not seen their deletion yet.
func stale(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := errors.Join(estuaryv1.AddToScheme(scheme), corev1.AddToScheme(scheme), appsv1.AddToScheme(scheme)); err != nil {
		t.Fatal(err)
	}
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...)
	for _, ix := range fieldIndexes {
		b = b.WithIndex(ix.obj, ix.field, ix.extract)
	}
	return b.Build()
}

// A delete the cache refuses is admitted when the API server no longer
// holds what the cache does, and refused when it still does.
func TestRefusedDeleteConfirmedLive(t *testing.T) {
	ctx := context.Background()
	n := underlay("rack1", estuaryv1.NetworkModeVLAN, map[string]string{"rack": "1"})
	sn := &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "rack1-v4"}, Spec: estuaryv1.SubnetSpec{Network: "rack1"}}
	ipi := &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{Name: "a"},
		Spec:       estuaryv1.IPInstanceSpec{Subnet: "rack1-v4"},
	}
	cache, empty := stale(t, sn.DeepCopy(), ipi.DeepCopy()), stale(t)
	var d *netmodel.Denial

	nv := &NetworkValidator{Reader: cache}
	if _, err := nv.ValidateDelete(ctx, &n); !errors.As(err, &d) {
		t.Fatalf("without a live reader: delete of network rack1 = %v, want the cache's refusal", err)
	}
	nv.Live = empty
	if _, err := nv.ValidateDelete(ctx, &n); err != nil {
		t.Errorf("subnet gone from the API server: delete of network rack1 = %v, want admitted", err)
	}
	nv.Live = stale(t, sn.DeepCopy())
	if _, err := nv.ValidateDelete(ctx, &n); !errors.As(err, &d) {
		t.Errorf("subnet still in the API server: delete of network rack1 = %v, want refused", err)
	}

	sv := &SubnetValidator{Reader: cache, Live: empty}
	if _, err := sv.ValidateDelete(ctx, sn); err != nil {
		t.Errorf("IPInstance gone from the API server: delete of subnet rack1-v4 = %v, want admitted", err)
	}
	sv.Live = stale(t, ipi.DeepCopy())
	if _, err := sv.ValidateDelete(ctx, sn); !errors.As(err, &d) {
		t.Errorf("IPInstance still in the API server: delete of subnet rack1-v4 = %v, want refused", err)
	}
}

// A create the cache refuses for want of an object created a moment ago is
// admitted once the API server shows it, and the mutating webhook finds
// such a network there too.
func TestMissingFromCacheConfirmedLive(t *testing.T) {
	ctx := context.Background()
	n := underlay("rack1", estuaryv1.NetworkModeVLAN, map[string]string{"rack": "1"})
	sn := &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "rack1-v4"}, Spec: estuaryv1.SubnetSpec{Network: "rack1",
		Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.77.100.0/24", Gateway: "10.77.100.1"}}}
	var d *netmodel.Denial
	sv := &SubnetValidator{Reader: stale(t), Live: stale(t)}
	if _, err := sv.ValidateCreate(ctx, sn); !errors.As(err, &d) {
		t.Fatalf("network in neither: create of subnet rack1-v4 = %v, want refused", err)
	}
	sv.Live = stale(t, n.DeepCopy())
	if _, err := sv.ValidateCreate(ctx, sn); err != nil {
		t.Errorf("network only in the API server: create of subnet rack1-v4 = %v, want admitted", err)
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p",
		Annotations: map[string]string{estuaryv1.AnnotationNetwork: "rack1"}}}
	pd := &PodDefaulter{Reader: stale(t, ns.DeepCopy()), Live: stale(t, ns.DeepCopy(), n.DeepCopy(), sn.DeepCopy())}
	if err := pd.Default(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if a := pod.Spec.Affinity; a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		t.Errorf("network only in the API server: pod got no domain affinity: %+v", pod.Spec.Affinity)
	}
	pv := &PodValidator{Reader: stale(t, ns.DeepCopy()), Live: stale(t, ns.DeepCopy(), n.DeepCopy(), sn.DeepCopy())}
	if _, err := pv.ValidateCreate(ctx, pod.DeepCopy()); err != nil {
		t.Errorf("network only in the API server: pod admission = %v, want admitted", err)
	}
}
