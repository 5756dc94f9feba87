package datapath

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// gateFixture is a running loop whose only part is the policy part, over
// a real API server and a real table in a namespace of the test's, with
// the endpoint store eps that Admit and every pass read. The namespace
// "tenant" has an ingress default-deny NetworkPolicy; "open" has none.
type gateFixture struct {
	ctx   context.Context
	k8s   client.Client
	cache cache.Cache
	table *ops.Policy
	part  *PolicyPart
	eps   *fakeEndpoints
}

func startGate(t *testing.T, wait time.Duration) *gateFixture {
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
	if err := trigger.WatchPolicy(ctx, c, false); err != nil {
		t.Fatal(err)
	}
	pods := NewPodView(ctx, func() (cache.Cache, error) { return cache.New(cfg, cache.Options{Scheme: scheme}) }, trigger)
	veth := func(k endpointstore.Key) string { return "veth" + k.ContainerID }
	part := NewPolicyPart(PolicyConfig{Reader: c, Pods: pods, HostVeth: veth, AdmitWait: wait, Log: logr.Discard()}, table)
	eps := &fakeEndpoints{}
	part.AdmitFrom(eps)
	records := recordsCache(t, cfg, "node-a")
	s, err := New(ctx, Options{Node: "node-a", Log: logr.Discard(), Parts: []Part{part}}, c, records, eps, trigger)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	go func() { _ = records.Start(ctx) }()
	go func() { _ = s.Run(ctx) }()
	create(t, k8s, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "open"}},
		&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "deny"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}})
	f := &gateFixture{ctx: ctx, k8s: k8s, cache: c, table: table, part: part, eps: eps}
	eventually(t, "the cache holds the policy", func() error {
		var l networkingv1.NetworkPolicyList
		if err := c.List(ctx, &l); err != nil || len(l.Items) == 0 {
			return fmt.Errorf("policies %d, %w", len(l.Items), err)
		}
		return nil
	})
	return f
}

// pod creates ns/name on node-a at ip and waits until the loop's cache
// holds it.
func (f *gateFixture) pod(t *testing.T, ns, name, ip string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
	create(t, f.k8s, pod)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}}
	if err := f.k8s.Status().Update(f.ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the cache holds pod "+name, func() error {
		return f.cache.Get(f.ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
	})
}

// store records an endpoint of ns/name behind host veth "veth"+id, as the
// CNI server does before it calls Admit.
func (f *gateFixture) store(id, ns, name, ip string) endpointstore.Endpoint {
	ep := endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: id, IfName: "eth0"}, PodNamespace: ns, PodName: name,
		IPs: []string{ip + "/32"}}
	eps, _ := f.eps.List()
	f.eps.set(append(eps, ep)...)
	return ep
}

func (f *gateFixture) read(t *testing.T) policy.Table {
	t.Helper()
	tab, err := f.table.Read()
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// entries is veth's entries in the ingress and egress maps.
func entries(tab policy.Table, veth string) string {
	return fmt.Sprintf("ingress %q egress %q", tab.Ingress[veth], tab.Egress[veth])
}

// TestAdmitWritesTheNewPodsChainBeforeReturning: with the pod cached and a
// default-deny policy selecting it, Admit returns "computed" and the pod's
// ingress chain is in the kernel when it does, not after a later pass.
func TestAdmitWritesTheNewPodsChainBeforeReturning(t *testing.T) {
	f := startGate(t, 10*time.Second)
	f.pod(t, "tenant", "web", "10.78.0.5")
	out, err := f.part.Admit(f.ctx, f.store("web", "tenant", "web", "10.78.0.5"))
	if err != nil || out != AdmitComputed {
		t.Fatalf("Admit: %q, %v", out, err)
	}
	tab := f.read(t)
	if tab.Ingress["vethweb"] != policy.IngressChain("vethweb") || tab.Egress["vethweb"] != "" {
		t.Fatalf("after Admit: %s, want the ingress chain and no egress entry", entries(tab, "vethweb"))
	}
}

// TestAdmitHoldsAPodNotCachedYet: an endpoint whose pod the cache does not
// hold yet, while a policy exists, is pending in both maps when Admit
// returns (a policy may select it); once the pod reaches the cache, a pass
// replaces the entries by its own and PendingChain goes.
func TestAdmitHoldsAPodNotCachedYet(t *testing.T) {
	f := startGate(t, 10*time.Second)
	out, err := f.part.Admit(f.ctx, f.store("late", "tenant", "late", "10.78.0.7"))
	if err != nil || out != AdmitComputed {
		t.Fatalf("Admit: %q, %v", out, err)
	}
	tab := f.read(t)
	if tab.Ingress["vethlate"] != policy.PendingChain || tab.Egress["vethlate"] != policy.PendingChain ||
		!slices.Equal(tab.Chains[policy.PendingChain], []string{"drop"}) {
		t.Fatalf("after Admit: %s, pending chain %v", entries(tab, "vethlate"), tab.Chains[policy.PendingChain])
	}
	f.pod(t, "tenant", "late", "10.78.0.7")
	eventually(t, "the cached pod's chain replaces the pending entries", func() error {
		tab := f.read(t)
		_, pending := tab.Chains[policy.PendingChain]
		if tab.Ingress["vethlate"] != policy.IngressChain("vethlate") || tab.Egress["vethlate"] != "" || pending {
			return fmt.Errorf("%s, pending chain there: %v", entries(tab, "vethlate"), pending)
		}
		return nil
	})
}

// TestAdmitHoldsWhenNoPassEndsInTime: while a pass holds the table (here
// the test holds the part's pass lock), Admit returns "pending" after its
// bound with both verdicts of the new veths in the kernel; a pass that
// listed the endpoints before they were stored keeps them pending; once
// the admission's pass runs, the selected pod gets its chain and the pod
// no policy selects is admitted again (no entry).
func TestAdmitHoldsWhenNoPassEndsInTime(t *testing.T) {
	f := startGate(t, 200*time.Millisecond)
	f.pod(t, "tenant", "db", "10.78.0.8")
	f.pod(t, "open", "free", "10.78.0.9")
	stale, err := f.part.compute(f.ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	f.part.gate.run.Lock()
	for _, ep := range []endpointstore.Endpoint{f.store("db", "tenant", "db", "10.78.0.8"), f.store("free", "open", "free", "10.78.0.9")} {
		out, err := f.part.Admit(f.ctx, ep)
		if err != nil || out != AdmitPending {
			f.part.gate.run.Unlock()
			t.Fatalf("Admit %s: %q, %v", ep.PodName, out, err)
		}
	}
	err = f.part.write(stale, nil) // a pass that listed before the ADDs
	tab := f.read(t)
	f.part.gate.run.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"vethdb", "vethfree"} {
		if tab.Ingress[v] != policy.PendingChain || tab.Egress[v] != policy.PendingChain {
			t.Errorf("after Admit and a stale pass: %s: %s, want pending in both", v, entries(tab, v))
		}
	}

	eventually(t, "the admission's pass decides both pods", func() error {
		tab := f.read(t)
		if tab.Ingress["vethdb"] != policy.IngressChain("vethdb") || tab.Egress["vethdb"] != "" {
			return fmt.Errorf("db: %s", entries(tab, "vethdb"))
		}
		if _, ok := tab.Ingress["vethfree"]; ok || tab.Egress["vethfree"] != "" {
			return fmt.Errorf("free (no policy selects it): %s", entries(tab, "vethfree"))
		}
		return nil
	})
}
