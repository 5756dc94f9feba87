package webhook

import (
	"net/netip"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
)

// replicaSetOf is ReplicaSet name in default, controlled by Deployment
// deploy.
func replicaSetOf(name, deploy string) *appsv1.ReplicaSet {
	labels := map[string]string{"app": name}
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: deploy, UID: types.UID("u-" + deploy), Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}}},
		},
	}
}

func ownedByReplicaSet(rs *appsv1.ReplicaSet) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name,
			UID: types.UID("u-" + rs.Name), Controller: ptr.To(true)}}
	}
}

// keptForDeployment records ip (of subnet, network kv) as kept for
// Deployment deploy in default, in phase.
func keptForDeployment(t *testing.T, subnet, ip, deploy string, phase estuaryv1.IPInstancePhase) {
	t.Helper()
	p := netip.MustParsePrefix(ip)
	ipi := instance("default", deploy+"-gone", "kv", subnet, ip)
	ipi.Name = estuaryv1.InstanceName(p.Addr())
	ipi.Spec.Address.Version = int32(family.Of(p.Addr()).Version())
	ipi.Spec.Binding.Owner = estuaryv1.OwnerReference{Kind: "Deployment", Name: deploy, UID: "u-" + deploy}
	ipi.Spec.Reserved = phase == estuaryv1.IPInstanceReserved
	ipi.Status.Phase = phase
	seed(t, ipi)
}

// TestWorkloadWithKeptAddressesNeedsNoCapacity: a pod whose Deployment has
// an address kept (Retained) or reserved for it in every family the pod
// needs takes those, so the webhook adds no free-capacity requirement: a
// re-created Deployment is not held Pending by a full network that keeps
// its addresses. A Deployment with one family kept, and one with none,
// still wait for capacity in every family.
func TestWorkloadWithKeptAddressesNeedsNoCapacity(t *testing.T) {
	seed(t, overlayNet("kv"), subnetObj("kv4", "kv", "10.41.0.0/16"), subnetObj("kv6", "kv", "fd00:41::/64"))
	web, half, res, other := replicaSetOf("web-1", "web"), replicaSetOf("half-1", "half"), replicaSetOf("res-1", "res"), replicaSetOf("other-1", "other")
	seed(t, web, half, res, other)
	keptForDeployment(t, "kv4", "10.41.0.5/16", "web", estuaryv1.IPInstanceRetained)
	keptForDeployment(t, "kv6", "fd00:41::5/64", "web", estuaryv1.IPInstanceRetained)
	keptForDeployment(t, "kv4", "10.41.0.6/16", "half", estuaryv1.IPInstanceRetained)
	keptForDeployment(t, "kv4", "10.41.0.7/16", "res", estuaryv1.IPInstanceReserved)
	keptForDeployment(t, "kv6", "fd00:41::7/64", "res", estuaryv1.IPInstanceReserved)
	both := required(term(notFull("kv", family.IPv4), notFull("kv", family.IPv6)))
	for _, c := range []struct {
		name string
		rs   *appsv1.ReplicaSet
		want *corev1.Affinity
	}{
		{"both families kept", web, nil},
		{"both families reserved", res, nil},
		{"IPv4 kept, IPv6 not", half, both},
		{"nothing kept", other, both},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := podObj("default", c.rs.Name+"-a", sel(annNet, "kv"), ownedByReplicaSet(c.rs))
			create(t, pod)
			got := &corev1.Pod{}
			if err := k8s.Get(ctx(t), client.ObjectKeyFromObject(pod), got); err != nil {
				t.Fatalf("get pod: %v", err)
			}
			if !equality.Semantic.DeepEqual(got.Spec.Affinity, c.want) {
				t.Errorf("affinity =\n%s\nwant\n%s", affinityString(got.Spec.Affinity), affinityString(c.want))
			}
		})
	}
}
