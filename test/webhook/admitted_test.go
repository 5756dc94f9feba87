package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// TestAdmitted builds a valid cluster step by step: every write is admitted.
func TestAdmitted(t *testing.T) {
	u1 := underlayNet("u1", vlan, sel("rack", "r1"))
	b1 := underlayNet("b1", bgp, sel("rack", "r2"))
	seed(t,
		nodeObj("n1", sel("rack", "r1", "zone", "z1")), nodeObj("n2", sel("rack", "r2", "zone", "z1")),
		overlayNet("ov"), u1, b1,
		// A selector that matches no node yet, and is not identical to another.
		underlayNet("u3", vlan, sel("rack", "r1", "tier", "spare")),
		subnetObj("ov4", "ov", "10.0.0.0/16"), subnetObj("ov6", "ov", "fd00::/64"),
		subnetObj("ov4-next", "ov", "10.1.0.0/16"),
		subnetObj("u4-a", "u1", "10.2.0.0/24", span("10.2.0.10", "10.2.0.99"), gw("10.2.0.1")),
		subnetObj("u4-b", "u1", "10.2.0.0/24", span("10.2.0.100", "10.2.0.199"), gw("10.2.0.1")),
		subnetObj("u6", "u1", "fd00:2::/64", gw("fd00:2::1"), vlanID(12)),
		subnetObj("b4", "b1", "10.3.0.0/24"),
		instance("default", "i1", "ov", "ov4", "10.0.0.7/16"),
	)
	t.Run("network update that keeps its domain apart", func(t *testing.T) {
		b1.Spec.BGPPeers = append(b1.Spec.BGPPeers, estuaryv1.BGPPeer{Address: "10.255.0.2", ASN: 64513})
		b1.Spec.NodeSelector = sel("rack", "r2", "zone", "z1")
		update(t, b1)
	})
	t.Run("metadata-only update", func(t *testing.T) {
		u1.Labels = map[string]string{"team": "net"}
		update(t, u1)
	})
	t.Run("delete a subnet without addresses, then its network", func(t *testing.T) {
		n := underlayNet("u9", vlan, sel("rack", "r9"))
		s := subnetObj("u9-4", "u9", "10.9.0.0/24", gw("10.9.0.1"))
		create(t, n, s)
		remove(t, s)
		remove(t, n)
	})
	t.Run("pods", func(t *testing.T) {
		seed(t, nsObj("inherit-ok", sel(annNet, "u1")))
		create(t,
			podObj("default", "plain", nil),
			podObj("default", "overlay", sel(annNet, "ov", annType, "Overlay")),
			podObj("default", "dual", sel(annSub, "ov4, ov6", annFam, "DualStack")),
			// Several subnets of one family, tried in the order written.
			podObj("default", "ordered", sel(annSub, "ov4-next,ov4,ov6")),
			podObj("default", "ordered-underlay", sel(annSub, "u4-b,u4-a", annType, "Underlay")),
			podObj("default", "underlay", sel(annNet, "u1", annSub, "u4-b", annType, "Underlay")),
			podObj("default", "bgp", sel(annSub, "b4")),
			podObj("inherit-ok", "inherited", nil),
			podObj("inherit-ok", "own-wins", sel(annNet, "ov")),
			podObj("default", "host", sel(annNet, "nope"), func(p *corev1.Pod) { p.Spec.HostNetwork = true }),
			// The pod webhooks skip kube-system, so the cluster can start
			// its own pods while the webhook is down.
			podObj("kube-system", "system", sel(annNet, "nope")),
		)
	})
}

// create creates objs, each admitted, and deletes them when the test ends.
func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	seed(t, objs...)
}

// update writes obj, which must be admitted, and waits for the cache.
func update(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Update(ctx(t), obj); err != nil {
		t.Fatalf("update %T %s: %v", obj, obj.GetName(), err)
	}
	waitCached(t, obj)
}
