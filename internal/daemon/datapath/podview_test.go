package datapath

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/estuary-cni/estuary/internal/policytranslate"
)

// TestPodViewRunsOnlyWhileAPolicyExists: over a real API server, with the
// daemon's cache holding node-a's pods alone, the policy part reads the
// endpoint's pod from it and runs no view of every pod while no policy
// exists; once a NetworkPolicy exists it reads every pod from the view,
// a pod created on another node pokes the trigger, and the view stops
// once no policy has been found for its Linger.
func TestPodViewRunsOnlyWhileAPolicyExists(t *testing.T) {
	cfg, k8s, _, scheme := startEnvConfig(t)
	c := nodeCache(t, cfg, scheme, "node-a")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	trigger := NewTrigger()
	if err := trigger.WatchPolicy(ctx, c, false); err != nil {
		t.Fatal(err)
	}
	view := NewPodView(ctx, func() (cache.Cache, error) { return cache.New(cfg, cache.Options{Scheme: scheme}) }, trigger)
	view.Linger = 0
	part := NewPolicyPart(PolicyConfig{Reader: c, Pods: view}, nil)
	go func() { _ = c.Start(ctx) }()
	create(t, k8s, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant"}})
	policyPod(t, k8s, "tenant", "server", "10.78.0.5", nil)
	policyPod(t, k8s, "tenant", "peer", "10.78.0.6", nil)
	eps := []policytranslate.PolicyEndpoint{{HostVeth: "vethsrv", Namespace: "tenant", Name: "server"}}

	eventually(t, "without a policy, the endpoint's pod alone and no view", func() error {
		in, err := part.read(ctx, eps)
		if err != nil || len(in.Pods) != 1 || in.Pods[0].Name != "server" || view.Running() {
			return fmt.Errorf("pods %v, err %w, view running %v", names(in.Pods), err, view.Running())
		}
		return nil
	})
	var local corev1.PodList
	if err := c.List(ctx, &local); err != nil || len(local.Items) != 1 {
		t.Fatalf("the daemon's cache holds %v (err %v), want node-a's pod alone", names(local.Items), err)
	}

	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "deny"}}
	create(t, k8s, np)
	eventually(t, "with a policy, every pod from the view", func() error {
		in, err := part.read(ctx, eps)
		if err != nil || len(in.Pods) != 2 || len(in.NetworkPolicies) != 1 || !view.Running() {
			return fmt.Errorf("pods %v, %d policies, err %w, view running %v", names(in.Pods), len(in.NetworkPolicies), err, view.Running())
		}
		return nil
	})
	drain(trigger)
	policyPod(t, k8s, "tenant", "late", "10.78.0.7", nil)
	waitPoke(t, trigger, "a pod created on node-b while a policy exists")

	if err := k8s.Delete(ctx, np); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the view stopped once no policy is found", func() error {
		in, err := part.read(ctx, eps)
		if err != nil || len(in.Pods) != 1 || view.Running() {
			return fmt.Errorf("pods %v, err %w, view running %v", names(in.Pods), err, view.Running())
		}
		return nil
	})
}

// TestPodViewFailsClosedUntilSynced: a view that cannot sync (its API
// server does not answer) fails the read within SyncTimeout rather than
// handing out a partial list of pods.
func TestPodViewFailsClosedUntilSynced(t *testing.T) {
	cfg, _, _, scheme := startEnvConfig(t)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, hc)
	if err != nil {
		t.Fatal(err)
	}
	// The view knows the Pod kind (the mapper asks the real server) but
	// its lists go nowhere.
	dead := rest.CopyConfig(cfg)
	dead.Host = "https://127.0.0.1:1"
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	view := NewPodView(ctx, func() (cache.Cache, error) {
		return cache.New(dead, cache.Options{Scheme: scheme, Mapper: mapper})
	}, NewTrigger())
	view.SyncTimeout = 300 * time.Millisecond
	t.Cleanup(view.Stop)
	start := time.Now()
	r, err := view.Reader(ctx)
	if err == nil || r != nil {
		t.Fatalf("Reader of a view that cannot sync = %v, %v; want an error", r, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Reader failed after %s, want about its SyncTimeout", took)
	}
	if !view.Running() {
		t.Fatal("the view stopped after a failed wait; it should keep syncing for the next pass")
	}
}

// nodeCache is a cache (not started) that holds, as the daemon's does,
// the pods of node alone.
func nodeCache(t testing.TB, cfg *rest.Config, scheme *runtime.Scheme, node string) cache.Cache {
	t.Helper()
	c, err := cache.New(cfg, cache.Options{Scheme: scheme,
		ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Field: fields.OneTermEqualSelector("spec.nodeName", node)}}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// drain empties t's slot of the cluster's pokes.
func drain(t *Trigger) {
	select {
	case <-t.cluster:
	default:
	}
}

// waitPoke waits, with a deadline, for a PokeCluster of t.
func waitPoke(tb testing.TB, t *Trigger, what string) {
	tb.Helper()
	select {
	case <-t.cluster:
	case <-time.After(20 * time.Second):
		tb.Fatalf("%s: no trigger", what)
	}
}
