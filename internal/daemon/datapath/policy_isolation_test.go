package datapath

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/internal/policytranslate"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// TestPolicyPartOneObjectCostsOnlyItself: over a real API server (with
// StrictIPCIDRValidation off, as 1.32-1.35 servers and objects stored
// before it hold IPv4-mapped ipBlocks) and a
// real table in a namespace of its own, with two local pods in two
// namespaces (tenant/server behind vethsrv, evil/victim behind vetheve),
// namespace evil holds a NetworkPolicy whose ipBlocks are IPv4-mapped
// (cidr ::ffff:0:0/96 except ::ffff:10.98.0.0/112, cidr
// ::ffff:10.99.0.0/112) and a ClusterNetworkPolicy denies its egress to
// domainNames. The mapped prefixes are enforced unmapped (10.99.0.1 in
// the victim's sets, 10.98.0.1 excepted), the
// domainNames rule denies all and is counted in
// estuary_policy_node_objects_not_enforced (until it is deleted), and
// tenant's policy is applied and keeps following changes made after those
// objects appeared.
func TestPolicyPartOneObjectCostsOnlyItself(t *testing.T) {
	nsPath := nstest.New(t)
	cfg, k8s, scheme := startLenientEnv(t)
	c := nodeCache(t, cfg, scheme, "node-a")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	table, err := ops.OpenPolicy(nsPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(table.Close)
	trigger := NewTrigger()
	if err := trigger.WatchPolicy(ctx, c, true); err != nil {
		t.Fatal(err)
	}
	pods := NewPodView(ctx, func() (cache.Cache, error) { return cache.New(cfg, cache.Options{Scheme: scheme}) }, trigger)
	part := NewPolicyPart(PolicyConfig{Reader: c, Pods: pods, Admin: true, Log: logr.Discard(),
		HostVeth: func(k endpointstore.Key) string { return "veth" + k.ContainerID }}, table)
	eps := &fakeEndpoints{}
	eps.set(
		endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: "srv", IfName: "eth0"}, PodNamespace: "tenant", PodName: "server", IPs: []string{"10.78.0.5/32"}},
		endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: "eve", IfName: "eth0"}, PodNamespace: "evil", PodName: "victim", IPs: []string{"10.78.0.7/32"}},
	)
	metrics := NewMetrics()
	records := recordsCache(t, cfg, "node-a")
	s, err := New(ctx, Options{Node: "node-a", Log: logr.Discard(), Parts: []Part{part}, Metrics: metrics}, c, records, eps, trigger)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	go func() { _ = records.Start(ctx) }()
	go func() { _ = s.Run(ctx) }()

	for _, n := range []string{"tenant", "evil"} {
		create(t, k8s, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	localPod(t, k8s, "tenant", "server", "10.78.0.5", "node-a", map[string]string{"app": "server"})
	localPod(t, k8s, "tenant", "client", "10.78.0.6", "node-b", map[string]string{"app": "client"})
	localPod(t, k8s, "evil", "victim", "10.78.0.7", "node-a", nil)

	mapped := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "evil", Name: "mapped"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "::ffff:0:0/96", Except: []string{"::ffff:10.98.0.0/112"}}}}},
			{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "::ffff:10.99.0.0/112"}}}},
		}}}
	if err := k8s.Create(ctx, mapped); err != nil {
		t.Fatalf("create the mapped NetworkPolicy: %v", err)
	}
	domains := &npv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "domains"},
		Spec: npv1beta1.ClusterNetworkPolicySpec{Tier: npv1beta1.AdminTier, Priority: 10,
			Subject: npv1beta1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": "evil"}}},
			Egress: []npv1beta1.ClusterNetworkPolicyEgressRule{{Action: npv1beta1.ClusterNetworkPolicyRuleActionDeny,
				To: []npv1beta1.ClusterNetworkPolicyEgressPeer{{DomainNames: []npv1beta1.DomainName{"example.com"}}}}},
		}}
	create(t, k8s, domains)
	if ps := policytranslate.ClusterPolicyProblems(domains); len(ps) != 1 || ps[0].Field != "spec.egress[0].to[0].domainNames" {
		t.Fatalf("ClusterPolicyProblems(domains) = %v", ps)
	}

	read := func() policy.Table {
		tab, err := table.Read()
		if err != nil {
			t.Fatal(err)
		}
		return tab
	}
	eventually(t, "the victim's policies are enforced, the mapped prefixes unmapped", func() error {
		tab := read()
		in, out := policy.IngressChain("vetheve"), policy.EgressChain("vetheve")
		if tab.Ingress["vetheve"] != in || !setHolds(tab, netip.MustParseAddr("10.99.0.1")) || setHolds(tab, netip.MustParseAddr("10.98.0.1")) {
			return fmt.Errorf("ingress map %v, sets %v", tab.Ingress, tab.Sets)
		}
		if tab.Egress["vetheve"] != out || !dropsAll(tab.Chains[out]) {
			return fmt.Errorf("egress map %v, chain %v: want the domainNames Deny to deny all", tab.Egress, tab.Chains[out])
		}
		return nil
	})
	eventually(t, "the ClusterNetworkPolicy is counted as not enforced as written", func() error {
		cnp := testutil.ToFloat64(metrics.notEnforced.WithLabelValues(policytranslate.KindClusterNetworkPolicy))
		np := testutil.ToFloat64(metrics.notEnforced.WithLabelValues(policytranslate.KindNetworkPolicy))
		if cnp != 1 || np != 0 || testutil.ToFloat64(metrics.closed) != 0 {
			return fmt.Errorf("not enforced: %v ClusterNetworkPolicy, %v NetworkPolicy; compile problems %v", cnp, np, testutil.ToFloat64(metrics.closed))
		}
		return nil
	})

	// A policy of another namespace, made after those objects, and a
	// change of it are applied.
	port := intstr.FromInt32(8080)
	allow := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "allow-client"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &port}},
			}},
		}}
	create(t, k8s, allow)
	chain := policy.IngressChain("vethsrv")
	hasPort := func(p string) error {
		tab := read()
		ok := slices.ContainsFunc(tab.Chains[chain], func(r string) bool { return strings.Contains(r, "tcp dport "+p+" ") })
		if tab.Ingress["vethsrv"] != chain || !ok || !setHolds(tab, netip.MustParseAddr("10.78.0.6")) {
			return fmt.Errorf("ingress map %v, chain %v", tab.Ingress, tab.Chains[chain])
		}
		return nil
	}
	eventually(t, "tenant's policy admits the client on 8080", func() error { return hasPort("8080") })
	allow.Spec.Ingress[0].Ports[0].Port = ptrTo(intstr.FromInt32(9090))
	if err := k8s.Update(ctx, allow); err != nil {
		t.Fatal(err)
	}
	eventually(t, "tenant's policy change to 9090 is applied", func() error { return hasPort("9090") })

	if err := k8s.Delete(ctx, domains); err != nil {
		t.Fatal(err)
	}
	eventually(t, "without the ClusterNetworkPolicy nothing is counted and the victim's egress is open", func() error {
		n := testutil.ToFloat64(metrics.notEnforced.WithLabelValues(policytranslate.KindClusterNetworkPolicy))
		if e, ok := read().Egress["vetheve"]; n != 0 || ok {
			return fmt.Errorf("not enforced: %v ClusterNetworkPolicy; victim's egress entry %q", n, e)
		}
		return nil
	})
}

func ptrTo[T any](v T) *T { return &v }

// dropsAll says whether a chain's rules (their tags) drop every packet:
// none matches a set, a protocol or a port, none returns or jumps, and
// the last drops (those before it may log or count).
func dropsAll(rules []string) bool {
	if len(rules) == 0 || !strings.HasSuffix(" "+rules[len(rules)-1], " drop") {
		return false
	}
	for _, r := range rules {
		for _, m := range []string{"@", "dport", "l4proto", "return", "goto", "jump"} {
			if strings.Contains(r, m) {
				return false
			}
		}
	}
	return true
}

// localPod creates a running pod at ip on node.
func localPod(t *testing.T, k8s client.Client, ns, name, ip, node string, labels map[string]string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	create(t, k8s, pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if err := k8s.Status().Update(context.Background(), pod); err != nil {
		t.Fatalf("pod %s status: %v", name, err)
	}
}

// startLenientEnv is startEnvConfig's API server with
// StrictIPCIDRValidation off (it stores IPv4-mapped prefixes as servers
// before 1.36 did) and the experimental channel's ClusterNetworkPolicy.
func startLenientEnv(t *testing.T) (*rest.Config, client.Client, *runtime.Scheme) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`")
	}
	crds, err := filepath.Glob(filepath.Join("..", "..", "..", "config", "crd", "networking.estuary.io_*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("estuary's CRDs: %v", err)
	}
	// The experimental channel's ClusterNetworkPolicy, which has
	// domainNames (the chart's, the standard channel's, prunes them).
	npapi, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/network-policy-api").Output()
	if err != nil {
		t.Fatalf("find network-policy-api's CRDs: %v", err)
	}
	crds = append(crds, filepath.Join(strings.TrimSpace(string(npapi)), "config", "crd", "experimental", "policy.networking.k8s.io_clusternetworkpolicies.yaml"))
	env := &envtest.Environment{CRDDirectoryPaths: crds, ErrorIfCRDPathMissing: true}
	env.ControlPlane.GetAPIServer().Configure().Append("feature-gates", "StrictIPCIDRValidation=false")
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), estuaryv1.AddToScheme(scheme), npv1beta1.Install(scheme)); err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, k8s, scheme
}
