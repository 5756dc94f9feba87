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

// deploymentWith seeds Deployment deploy in default and its ReplicaSet
// name, controlled by it with the Deployment's UID, and returns the
// ReplicaSet as stored (with its UID).
func deploymentWith(t *testing.T, name, deploy string) *appsv1.ReplicaSet {
	t.Helper()
	labels := map[string]string{"app": deploy}
	template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: deploy},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template}}
	seed(t, d)
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "apps/v1", Kind: "Deployment", Name: deploy, UID: d.UID, Controller: ptr.To(true)}}},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: template},
	}
	seed(t, rs)
	return rs
}

// ownedByReplicaSet makes a pod rs's, by rs's UID.
func ownedByReplicaSet(rs *appsv1.ReplicaSet) podOpt {
	return forgedOwner("ReplicaSet", rs.Name, rs.UID)
}

// forgedOwner gives a pod a controller reference to apps/v1 kind name
// with uid, as anyone who may create pods can.
func forgedOwner(kind, name string, uid types.UID) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: uid, Controller: ptr.To(true)}}
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
// still wait for capacity in every family, and so does a pod whose
// controller reference names the Deployment or its ReplicaSet with a UID
// that is not theirs.
func TestWorkloadWithKeptAddressesNeedsNoCapacity(t *testing.T) {
	seed(t, overlayNet("kv"), subnetObj("kv4", "kv", "10.41.0.0/16"), subnetObj("kv6", "kv", "fd00:41::/64"))
	web, half, res, other := deploymentWith(t, "web-1", "web"), deploymentWith(t, "half-1", "half"), deploymentWith(t, "res-1", "res"), deploymentWith(t, "other-1", "other")
	keptForDeployment(t, "kv4", "10.41.0.5/16", "web", estuaryv1.IPInstanceRetained)
	keptForDeployment(t, "kv6", "fd00:41::5/64", "web", estuaryv1.IPInstanceRetained)
	keptForDeployment(t, "kv4", "10.41.0.6/16", "half", estuaryv1.IPInstanceRetained)
	keptForDeployment(t, "kv4", "10.41.0.7/16", "res", estuaryv1.IPInstanceReserved)
	keptForDeployment(t, "kv6", "fd00:41::7/64", "res", estuaryv1.IPInstanceReserved)
	both := required(term(notFull("kv", family.IPv4), notFull("kv", family.IPv6)))
	for _, c := range []struct {
		name  string
		pod   string
		owner podOpt
		want  *corev1.Affinity
	}{
		{"both families kept", "web-1-a", ownedByReplicaSet(web), nil},
		{"both families reserved", "res-1-a", ownedByReplicaSet(res), nil},
		{"IPv4 kept, IPv6 not", "half-1-a", ownedByReplicaSet(half), both},
		{"nothing kept", "other-1-a", ownedByReplicaSet(other), both},
		{"a forged reference to the ReplicaSet", "forged-rs", forgedOwner("ReplicaSet", web.Name, "not-its-uid"), both},
		{"a forged reference to the Deployment", "forged-deploy", forgedOwner("Deployment", "web", "not-its-uid"), both},
	} {
		t.Run(c.name, func(t *testing.T) {
			pod := podObj("default", c.pod, sel(annNet, "kv"), c.owner)
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
