package main

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// TestLoadAndUnload runs a small load against a real API server: the
// peers are Running with their addresses, every namespace has its
// policies, a second load changes nothing, and unload deletes the peers,
// the policies and the Node.
func TestLoadAndUnload(t *testing.T) {
	cfg, _, stop, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop envtest: %v", err)
		}
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lc := loadConfig{Namespaces: 3, Pods: 10, Policies: 10, Workers: 4, Node: "peer-sim", CIDR: "10.240.0.0/16"}
	for range 2 {
		if err := load(ctx, cs, lc); err != nil {
			t.Fatal(err)
		}
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, "peer-sim", metav1.GetOptions{})
	if err != nil || !node.Spec.Unschedulable {
		t.Fatalf("node peer-sim: %v, %+v", err, node.Spec)
	}
	pod, err := cs.CoreV1().Pods("pb-002").Get(ctx, "p07", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP != "10.240.0.28" || pod.Spec.NodeName != "peer-sim" ||
		pod.Labels["app"] != "a7" || pod.Labels["role"] != "r2" {
		t.Errorf("pb-002/p07: phase %s, address %s, node %s, labels %v", pod.Status.Phase, pod.Status.PodIP, pod.Spec.NodeName, pod.Labels)
	}
	ns, err := cs.CoreV1().Namespaces().Get(ctx, "pb-001", metav1.GetOptions{})
	if err != nil || ns.Labels["team"] != "t1" {
		t.Errorf("namespace pb-001: %v, labels %v", err, ns.Labels)
	}
	for _, n := range []string{"pb-000", "pb-001", "pb-002"} {
		nps, err := cs.NetworkingV1().NetworkPolicies(n).List(ctx, metav1.ListOptions{})
		if err != nil || len(nps.Items) != 10 {
			t.Fatalf("policies of %s: %v, %d", n, err, len(nps.Items))
		}
	}

	if err := unload(ctx, cs, "peer-sim", false); err != nil {
		t.Fatal(err)
	}
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: PeerLabel})
	if err != nil || len(pods.Items) != 0 {
		t.Errorf("peers after unload: %v, %d left", err, len(pods.Items))
	}
	nps, err := cs.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{})
	if err != nil || len(nps.Items) != 0 {
		t.Errorf("policies after unload: %v, %d left", err, len(nps.Items))
	}
	if _, err := cs.CoreV1().Nodes().Get(ctx, "peer-sim", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node peer-sim after unload: %v", err)
	}
}
