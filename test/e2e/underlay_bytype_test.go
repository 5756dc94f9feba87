//go:build lab

package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/test/infra/lab"
)

// byTypeDomain is one untagged VLAN Underlay network of the by-type test:
// its node, and its subnet on the lab's switch, whose gateway the router
// holds.
type byTypeDomain struct {
	network, node, cidr string
}

// byTypeDomainLabel puts node-1 and node-2 in two different domains.
const byTypeDomainLabel = "estuary-e2e/underlay-domain"

// TestUnderlayByTypeSpreadsOverDomains: a Deployment whose pods ask for
// network type Underlay and name no network, spread over two untagged VLAN
// networks (node-1's on the lab's underlay subnet, node-2's on a second
// subnet the router also serves on the switch), runs its pods on both
// domains; each pod takes the network of its node, with an address of that
// network's subnet recorded in its IPInstance, and reaches the external
// host, and a pod of the other domain, with its own address.
func TestUnderlayByTypeSpreadsOverDomains(t *testing.T) {
	e := needLab(t)
	domains := []byTypeDomain{
		{network: "bytype-a", node: "node-1", cidr: lab.UnderlayCIDR},
		{network: "bytype-b", node: "node-2", cidr: "10.77.102.0/24"},
	}
	// The router serves the second subnet on the switch, untagged.
	gwB := netip.MustParsePrefix(domains[1].cidr).Addr().Next()
	if _, err := e.run(testCtx(t, time.Minute), "router", "ip", "addr", "add", gwB.String()+"/24", "dev", "eth0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.run(context.Background(), "router", "ip", "addr", "del", gwB.String()+"/24", "dev", "eth0")
	})
	for _, d := range domains {
		e.labelNodes(t, byTypeDomainLabel, d.network, d.node)
		e.createByTypeNetwork(t, d)
	}
	ns := e.newNamespace(t, "bytype")
	const replicas = 4
	sel := map[string]string{"app": "bytype"}
	if err := e.c.Create(testCtx(t, time.Minute), byTypeDeployment(ns, sel, replicas)); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	pods := e.waitReady(t, ns, sel, replicas, 4*time.Minute)

	byNode := map[string]corev1.Pod{}
	t.Run("each pod has its node's network", func(t *testing.T) {
		ctx := testCtx(t, time.Minute)
		for _, p := range pods {
			d, ok := domainOf(domains, p.Spec.NodeName)
			if !ok {
				t.Errorf("pod %s runs on %s, outside both domains", p.Name, p.Spec.NodeName)
				continue
			}
			ipi, err := e.podInstance(ctx, ns, p.Name)
			if err != nil {
				t.Fatal(err)
			}
			addr, err := netip.ParseAddr(p.Status.PodIP)
			if ipi.Spec.Network != d.network || instanceAddr(ipi) != p.Status.PodIP || err != nil || !netip.MustParsePrefix(d.cidr).Contains(addr) {
				t.Errorf("pod %s on %s: IPInstance network %s address %s, pod address %s; want network %s, an address of %s",
					p.Name, p.Spec.NodeName, ipi.Spec.Network, instanceAddr(ipi), p.Status.PodIP, d.network, d.cidr)
			}
			if terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms; len(terms) < 2 {
				t.Errorf("pod %s: %d node affinity terms, want one per Underlay domain", p.Name, len(terms))
			}
			byNode[p.Spec.NodeName] = p
		}
		if len(byNode) != len(domains) {
			t.Fatalf("pods ran on %d domains, want %d (a topology spread over %s)", len(byNode), len(domains), byTypeDomainLabel)
		}
	})

	serveClientIP(t, e.externalNetns, fmt.Sprintf("%s:%d", e.externalAddr, externalPort))
	for _, d := range domains {
		p := byNode[d.node]
		t.Run("external host and "+d.network+" pod reach each other", func(t *testing.T) {
			e.checkExternalBothWays(t, &p, e.podNetns(t, &p))
		})
	}
	t.Run("pods of the two domains reach each other", func(t *testing.T) {
		a, b := byNode[domains[0].node], byNode[domains[1].node]
		checkClientIP(t, e.podNetns(t, &a), &a, &b)
		checkClientIP(t, e.podNetns(t, &b), &b, &a)
	})
}

// createByTypeNetwork creates d's untagged VLAN network, whose domain is
// the nodes labelled byTypeDomainLabel=d.network, and its IPv4 subnet
// (addresses 10 to 200, the first address the router's gateway).
func (e *labEnv) createByTypeNetwork(t *testing.T, d byTypeDomain) {
	t.Helper()
	prefix := netip.MustParsePrefix(d.cidr)
	nw := &estuaryv1.Network{
		ObjectMeta: metav1.ObjectMeta{Name: d.network},
		Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeVLAN, NetID: ptr.To[int64](0),
			NodeSelector: map[string]string{byTypeDomainLabel: d.network}},
	}
	sn := &estuaryv1.Subnet{
		ObjectMeta: metav1.ObjectMeta{Name: d.network + "-v4"},
		Spec: estuaryv1.SubnetSpec{Network: d.network, Range: estuaryv1.AddressRange{
			Version: 4, CIDR: d.cidr, Gateway: estuaryv1.IPAddress(prefix.Addr().Next().String()),
			Start: estuaryv1.IPAddress(nthAddr(prefix, 10).String()), End: estuaryv1.IPAddress(nthAddr(prefix, 200).String()),
		}},
	}
	e.createNetwork(t, nw, sn)
}

// byTypeDeployment: netexec pods asking for network type Underlay, naming
// no network, spread evenly over the Underlay domains.
func byTypeDeployment(ns string, sel map[string]string, replicas int32) *appsv1.Deployment {
	spec := podTemplate("", netexecContainer())
	spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: byTypeDomainLabel, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: sel},
	}}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bytype"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel, Annotations: map[string]string{estuaryv1.AnnotationNetworkType: string(estuaryv1.NetworkTypeUnderlay)}},
				Spec:       spec,
			},
		},
	}
}

func domainOf(domains []byTypeDomain, node string) (byTypeDomain, bool) {
	for _, d := range domains {
		if d.node == node {
			return d, true
		}
	}
	return byTypeDomain{}, false
}
