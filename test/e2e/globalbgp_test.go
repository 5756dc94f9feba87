//go:build lab

package e2e_test

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// The GlobalBGP network the test creates: its subnet is on no link either;
// each pod's /32 reaches the router from the BGP speaker of its node's BGP
// network.
const (
	globalNetwork = "global"
	globalSubnet  = "global-v4"
	globalCIDR    = "10.77.210.0/24"
)

// TestGlobalBGP: a pod that asks for GlobalBGP by hybridnet's network-type
// annotation (no network named) gets an address of the GlobalBGP network
// on node-2; node-2's speaker for its BGP network announces the /32 to the
// router, which routes it via node-2; the external host and the pod reach
// each other with the pod's own address; deleting the pod withdraws the
// route.
func TestGlobalBGP(t *testing.T) {
	e := needLab(t)
	e.labelNodes(t, bgpLabel, bgpNetwork, bgpNodes...)
	e.createBGP(t)
	cidr := netip.MustParsePrefix(globalCIDR)
	e.createNetwork(t, &estuaryv1.Network{
		ObjectMeta: metav1.ObjectMeta{Name: globalNetwork},
		Spec:       estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeGlobalBGP},
	}, &estuaryv1.Subnet{
		ObjectMeta: metav1.ObjectMeta{Name: globalSubnet},
		Spec: estuaryv1.SubnetSpec{Network: globalNetwork, Range: estuaryv1.AddressRange{
			Version: 4, CIDR: cidr.String(),
			Start: estuaryv1.IPAddress(nthAddr(cidr, 10).String()), End: estuaryv1.IPAddress(nthAddr(cidr, 200).String()),
		}},
	})
	ns := e.newNamespace(t, "globalbgp")
	p := netexecPod("global-a", "node-2", nil)
	p.Annotations = map[string]string{netmodel.HybridnetNetworkType: "GlobalBGP"}
	e.mustCreate(t, ns, p)
	pod := e.waitPods(t, ns, "global-a")["global-a"]
	if ip, err := netip.ParseAddr(pod.Status.PodIP); err != nil || !cidr.Contains(ip) {
		t.Fatalf("pod %s has address %q, want one in the GlobalBGP subnet %s", pod.Name, pod.Status.PodIP, cidr)
	}

	t.Run("router learns the pod's /32 from its node", func(t *testing.T) {
		e.waitRouterRoute(t, pod.Status.PodIP, "node-2")
	})

	t.Run("external host and pod reach each other through the announcement", func(t *testing.T) {
		serveClientIP(t, e.externalNetns, fmt.Sprintf("%s:%d", e.externalAddr, externalPort))
		e.checkExternalBothWays(t, &pod, e.podNetns(t, &pod))
	})

	t.Run("deleting the pod withdraws its route", func(t *testing.T) {
		if err := e.c.Delete(testCtx(t, time.Minute), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.Name}}); err != nil {
			t.Fatalf("delete pod %s: %v", pod.Name, err)
		}
		e.waitRouterRoute(t, pod.Status.PodIP, "")
	})
}
