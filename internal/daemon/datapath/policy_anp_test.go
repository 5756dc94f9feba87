package datapath

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// TestPolicyPartEnforcesAdminNetworkPolicies: with the v1alpha1 CRDs
// served (test/crd/policy-v1alpha1), an AdminNetworkPolicy's Deny rule
// and a BaselineAdminNetworkPolicy's Deny rule, created after the loop
// started, reach the node's real table through the watch alone: each
// rule's peer set, named by its converted rule ID, holds its peer, and the
// server's chains drop.
func TestPolicyPartEnforcesAdminNetworkPolicies(t *testing.T) {
	nsPath := nstest.New(t)
	cfg, k8s, _, scheme := startEnvConfig(t)
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("..", "..", "..", "test", "crd", "policy-v1alpha1")}, ErrorIfPathMissing: true,
	}); err != nil {
		t.Fatal(err)
	}
	if err := npv1alpha1.Install(scheme); err != nil {
		t.Fatal(err)
	}
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
	if err := trigger.WatchAdminNetworkPolicies(ctx, c, true, true); err != nil {
		t.Fatal(err)
	}
	veth := func(k endpointstore.Key) string { return "veth" + k.ContainerID }
	pods := NewPodView(ctx, func() (cache.Cache, error) { return cache.New(cfg, cache.Options{Scheme: scheme}) }, trigger)
	part := NewPolicyPart(PolicyConfig{Reader: c, Pods: pods, Admin: true, AdminNetworkPolicy: true, BaselineAdminNetworkPolicy: true,
		HostVeth: veth, Log: logr.Discard()}, table)
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

	create(t, k8s, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}})
	policyPod(t, k8s, "tenant", "server", "10.78.0.5", map[string]string{"app": "server"})
	policyPod(t, k8s, "tenant", "client", "10.78.0.6", map[string]string{"app": "client"})
	server := &npv1alpha1.NamespacedPod{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}}
	create(t, k8s, &npv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-client"},
		Spec: npv1alpha1.AdminNetworkPolicySpec{Priority: 10, Subject: npv1alpha1.AdminNetworkPolicySubject{Pods: server},
			Ingress: []npv1alpha1.AdminNetworkPolicyIngressRule{{Action: npv1alpha1.AdminNetworkPolicyRuleActionDeny,
				From: []npv1alpha1.AdminNetworkPolicyIngressPeer{{Pods: &npv1alpha1.NamespacedPod{
					PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}}}}}}}}},
		&npv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Spec: npv1alpha1.BaselineAdminNetworkPolicySpec{Subject: npv1alpha1.AdminNetworkPolicySubject{Pods: server},
				Egress: []npv1alpha1.BaselineAdminNetworkPolicyEgressRule{{Action: npv1alpha1.BaselineAdminNetworkPolicyRuleActionDeny,
					To: []npv1alpha1.BaselineAdminNetworkPolicyEgressPeer{{Networks: []npv1alpha1.CIDR{"192.0.2.0/24"}}}}}}})

	holds := func(tab policy.Table, id, addr string) bool {
		set, ok := tab.Sets[policy.SetName(id, family.IPv4)]
		a := netip.MustParseAddr(addr)
		return ok && slices.ContainsFunc(set.Ranges, func(r family.Range) bool { return r.First.Compare(a) <= 0 && a.Compare(r.Last) <= 0 })
	}
	drops := func(rules []string) bool {
		return slices.ContainsFunc(rules, func(r string) bool { return strings.HasSuffix(r, " drop") })
	}
	in, out := policy.IngressChain("vethsrv"), policy.EgressChain("vethsrv")
	eventually(t, "the ANP's and the BANP's Deny rules in the server's chains", func() error {
		tab, err := table.Read()
		if err != nil {
			return err
		}
		if !holds(tab, "cnp/anp:deny-client/ingress/0", "10.78.0.6") || !drops(tab.Chains[in]) {
			return fmt.Errorf("ANP: ingress chain %v, sets %v", tab.Chains[in], mapsKeys2(tab.Sets))
		}
		if !holds(tab, "cnp/banp:default/egress/0", "192.0.2.1") || !drops(tab.Chains[out]) {
			return fmt.Errorf("BANP: egress chain %v, sets %v", tab.Chains[out], mapsKeys2(tab.Sets))
		}
		return nil
	})
}

func mapsKeys2(m map[string]policy.Set) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
