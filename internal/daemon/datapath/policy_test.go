package datapath

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// policyPod creates a running pod at ip: tenant/server, the loop's
// endpoint, on node-a (the loop's node); every other pod on node-b, so
// that peers reach policy through the view of every pod alone.
func policyPod(t *testing.T, k8s client.Client, ns, name, ip string, labels map[string]string) *corev1.Pod {
	t.Helper()
	node := "node-b"
	if ns == "tenant" && name == "server" {
		node = "node-a"
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	create(t, k8s, pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		t.Fatalf("pod %s status: %v", name, err)
	}
	return pod
}

// setHolds reports whether a set of the table holds a.
func setHolds(tab policy.Table, a netip.Addr) bool {
	for _, s := range tab.Sets {
		for _, r := range s.Ranges {
			if r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0 {
				return true
			}
		}
	}
	return false
}

// startPolicyLoop runs a loop whose only part is the policy part, over a
// real API server (envtest, with the CRDs of config/crd) and a real table
// in a namespace of the test's, with one local endpoint: the pod
// tenant/server at 10.78.0.5 behind host veth "vethsrv". admin enforces
// ClusterNetworkPolicy too. As the daemon's, the loop's cache holds the
// pods of node-a alone, and the part reads every pod from a PodView.
func startPolicyLoop(t *testing.T, admin bool) (context.Context, client.Client, *ops.Policy) {
	t.Helper()
	nsPath := nstest.New(t)
	cfg, k8s, _, scheme := startEnvConfig(t)
	c := nodeCache(t, cfg, scheme, "node-a")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	table, err := ops.OpenPolicy(nsPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(table.Close)
	trigger := NewTrigger()
	if err := trigger.WatchPolicy(ctx, c, admin); err != nil {
		t.Fatal(err)
	}
	veth := func(k endpointstore.Key) string { return "veth" + k.ContainerID }
	pods := NewPodView(ctx, func() (cache.Cache, error) { return cache.New(cfg, cache.Options{Scheme: scheme}) }, trigger)
	part := NewPolicyPart(PolicyConfig{Reader: c, Pods: pods, Admin: admin, HostVeth: veth, Log: logr.Discard()}, table)
	eps := &fakeEndpoints{}
	eps.set(endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: "srv", IfName: "eth0"}, PodNamespace: "tenant", PodName: "server",
		IPs: []string{"10.78.0.5/32"}})
	records := recordsCache(t, cfg, "node-a")
	s, err := New(ctx, Options{Node: "node-a", Log: logr.Discard(), Parts: []Part{part}}, c, records, eps, trigger)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	go func() { _ = records.Start(ctx) }()
	go func() { _ = s.Run(ctx) }()
	return ctx, k8s, table
}

// TestPolicyPartFollowsPoliciesAndLabels: with a real API server and a
// real nftables table in a namespace of its own, the loop gives a local
// pod selected by a NetworkPolicy its ingress chain, with the allowed peer
// in the chain's set; a label change of the peer and the policy's deletion
// each reach the table through the policy watch alone.
func TestPolicyPartFollowsPoliciesAndLabels(t *testing.T) {
	ctx, k8s, table := startPolicyLoop(t, false)

	create(t, k8s, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}})
	policyPod(t, k8s, "tenant", "server", "10.78.0.5", map[string]string{"app": "server"})
	cl := policyPod(t, k8s, "tenant", "client", "10.78.0.6", map[string]string{"app": "client"})
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(8080)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "allow-client"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		}}
	create(t, k8s, np)

	client6 := netip.MustParseAddr("10.78.0.6")
	read := func() policy.Table {
		tab, err := table.Read()
		if err != nil {
			t.Fatal(err)
		}
		return tab
	}
	eventually(t, "the server's ingress chain admits the client", func() error {
		tab := read()
		chain := policy.IngressChain("vethsrv")
		if tab.Ingress["vethsrv"] != chain || len(tab.Chains[chain]) == 0 || !setHolds(tab, client6) {
			return fmt.Errorf("ingress map %v, chain %v, sets %v", tab.Ingress, tab.Chains[chain], tab.Sets)
		}
		if _, ok := tab.Egress["vethsrv"]; ok {
			return fmt.Errorf("an egress entry for an ingress-only policy: %v", tab.Egress)
		}
		return nil
	})

	cl.Labels = map[string]string{"app": "other"}
	if err := k8s.Update(ctx, cl); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the relabelled client leaves the allowed set while the server stays isolated", func() error {
		tab := read()
		if setHolds(tab, client6) || tab.Ingress["vethsrv"] == "" {
			return fmt.Errorf("ingress map %v, sets %v", tab.Ingress, tab.Sets)
		}
		return nil
	})

	if err := k8s.Delete(ctx, np); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no policy selects the server: its entry is gone", func() error {
		tab := read()
		if len(tab.Ingress)+len(tab.Egress) != 0 || !tab.Present || slices.ContainsFunc(mapsKeys(tab.Chains), isPodChain) {
			return fmt.Errorf("ingress %v, egress %v, chains %v", tab.Ingress, tab.Egress, mapsKeys(tab.Chains))
		}
		return nil
	})
}

func mapsKeys(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func isPodChain(name string) bool {
	return name == policy.IngressChain("vethsrv") || name == policy.EgressChain("vethsrv")
}

// TestPolicyPartEnforcesClusterNetworkPolicy: with the ClusterNetworkPolicy
// CRD the chart ships, an Admin-tier policy denying a client gives the
// local server an ingress chain that drops the client's set, and deleting
// the policy removes it, through the policy watch alone.
func TestPolicyPartEnforcesClusterNetworkPolicy(t *testing.T) {
	ctx, k8s, table := startPolicyLoop(t, true)

	create(t, k8s, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}})
	policyPod(t, k8s, "tenant", "server", "10.78.0.5", map[string]string{"app": "server"})
	policyPod(t, k8s, "tenant", "client", "10.78.0.6", map[string]string{"app": "client"})
	cnp := &npv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-client"},
		Spec: npv1beta1.ClusterNetworkPolicySpec{Tier: npv1beta1.AdminTier, Priority: 10,
			Subject: npv1beta1.ClusterNetworkPolicySubject{Pods: &npv1beta1.NamespacedPod{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}}},
			Ingress: []npv1beta1.ClusterNetworkPolicyIngressRule{{Action: npv1beta1.ClusterNetworkPolicyRuleActionDeny,
				From: []npv1beta1.ClusterNetworkPolicyIngressPeer{{Pods: &npv1beta1.NamespacedPod{
					PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}}}}},
		}}
	create(t, k8s, cnp)

	client6 := netip.MustParseAddr("10.78.0.6")
	read := func() policy.Table {
		tab, err := table.Read()
		if err != nil {
			t.Fatal(err)
		}
		return tab
	}
	chain := policy.IngressChain("vethsrv")
	eventually(t, "the server's ingress chain drops the client", func() error {
		tab := read()
		drops := slices.ContainsFunc(tab.Chains[chain], func(r string) bool { return strings.HasSuffix(r, " drop") })
		if tab.Ingress["vethsrv"] != chain || !drops || !setHolds(tab, client6) {
			return fmt.Errorf("ingress map %v, chain %v, sets %v", tab.Ingress, tab.Chains[chain], tab.Sets)
		}
		return nil
	})
	if err := k8s.Delete(ctx, cnp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no policy selects the server: its entry is gone", func() error {
		tab := read()
		if len(tab.Ingress) != 0 || slices.ContainsFunc(mapsKeys(tab.Chains), isPodChain) {
			return fmt.Errorf("ingress %v, chains %v", tab.Ingress, mapsKeys(tab.Chains))
		}
		return nil
	})
}
