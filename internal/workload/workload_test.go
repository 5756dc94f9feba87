package workload

import (
	"testing"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func TestPoolOf(t *testing.T) {
	record := func(phase estuaryv1.IPInstancePhase, kind, name string) *estuaryv1.IPInstance {
		return &estuaryv1.IPInstance{
			Spec:   estuaryv1.IPInstanceSpec{Binding: estuaryv1.Binding{Namespace: "ns", PodName: "p", Owner: estuaryv1.OwnerReference{Kind: kind, Name: name}}},
			Status: estuaryv1.IPInstanceStatus{Phase: phase},
		}
	}
	for _, c := range []struct {
		name string
		ipi  *estuaryv1.IPInstance
		want string
	}{
		{"a Deployment's kept address", record(estuaryv1.IPInstanceRetained, KindDeployment, "api"), "ns/Deployment/api"},
		{"a StatefulSet's reserved address", record(estuaryv1.IPInstanceReserved, KindStatefulSet, "db"), "ns/StatefulSet/db"},
		{"a StatefulSet's kept address stays with the pod name", record(estuaryv1.IPInstanceRetained, KindStatefulSet, "db"), ""},
		{"an address in use", record(estuaryv1.IPInstanceBound, KindDeployment, "api"), ""},
		{"no owner", record(estuaryv1.IPInstanceReserved, "", ""), ""},
	} {
		ref, ok := PoolOf(c.ipi)
		if got := map[bool]string{true: ref.Key(), false: ""}[ok]; got != c.want {
			t.Errorf("%s: pool %q, want %q", c.name, got, c.want)
		}
	}
}
