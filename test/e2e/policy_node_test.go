//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/test/infra/lab"
)

// hostHTTPPort is the port of the test's host-network netexec servers.
const hostHTTPPort = 18080

// hostNetexecPod is an agnhost netexec pod in node's network namespace.
func hostNetexecPod(name, node string) *corev1.Pod {
	c := netexecContainer()
	c.Args = []string{"netexec", fmt.Sprintf("--http-port=%d", hostHTTPPort), fmt.Sprintf("--udp-port=%d", hostHTTPPort+1)}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: podTemplate(node, c)}
	p.Spec.HostNetwork = true
	return p
}

// denyAll is a NetworkPolicy selecting app=p for one direction with no rule.
func denyAll(ns, name string, t networkingv1.PolicyType) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "p"}},
			PolicyTypes: []networkingv1.PolicyType{t}}}
}

// TestPolicyNodeTrafficOnTheLab: Kubernetes' rule that traffic between a
// pod and its own node is always allowed, on the lab's kube-proxy
// (iptables mode), which every daemon reports with no policy problem.
// Under an egress default-deny pod p (node-1) still reaches a host-network
// server on its own node, not one on node-2 nor another pod; under an
// ingress default-deny its own node's network namespace (where kubelet's
// probes come from) still reaches p, node-2's does not. With the chart's
// networkPolicy.podToNodeTraffic=policy (helm upgrade) p's egress
// default-deny covers its own node too; set back to allow, it reaches it
// again.
func TestPolicyNodeTrafficOnTheLab(t *testing.T) {
	e := needLab(t)
	e.checkKubeProxyModeReported(t, "iptables")
	ns := e.newNamespace(t, "nodetraffic")
	e.mustCreate(t, ns, netexecPod("p", "node-1", map[string]string{"app": "p"}), netexecPod("q", "node-2", nil),
		hostNetexecPod("h1", "node-1"), hostNetexecPod("h2", "node-2"))
	pods := e.waitPods(t, ns, "p", "q", "h1", "h2")
	p, q := pods["p"], pods["q"]
	pNS := e.podNetns(t, &p)
	dial := func(host string, port int) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := dialFrom(ctx, pNS, "http", "hostname", host, port)
			return err
		}
	}
	fromNode := func(node string) func(context.Context) error {
		return func(ctx context.Context) error {
			_, err := httpGet(ctx, e.nodeNetns[node], fmt.Sprintf("http://%s:%d/hostname", p.Status.PodIP, httpPort))
			return err
		}
	}
	toOwnNode, toOtherNode := dial(e.nodeAddr["node-1"], hostHTTPPort), dial(e.nodeAddr["node-2"], hostHTTPPort)
	eventually(t, "p -> host-network server on its own node, before any policy", policyTimeout, toOwnNode)
	eventually(t, "p -> host-network server on node-2, before any policy", policyTimeout, toOtherNode)

	ctx := testCtx(t, 15*time.Minute)
	if err := e.c.Create(ctx, denyAll(ns, "deny-egress", networkingv1.PolicyTypeEgress)); err != nil {
		t.Fatal(err)
	}
	refused(t, "p (egress default-deny) -> pod q", dial(q.Status.PodIP, httpPort))
	refused(t, "p (egress default-deny) -> host-network server on node-2", toOtherNode)
	eventually(t, "p (egress default-deny) -> host-network server on its own node", policyTimeout, toOwnNode)

	if err := e.c.Create(ctx, denyAll(ns, "deny-ingress", networkingv1.PolicyTypeIngress)); err != nil {
		t.Fatal(err)
	}
	refused(t, "node-2's host network -> p (ingress default-deny)", fromNode("node-2"))
	eventually(t, "node-1's host network -> p (ingress default-deny), its own node", policyTimeout, fromNode("node-1"))

	e.setPodToNodeTraffic(t, "policy")
	refused(t, "p (egress default-deny, podToNodeTraffic=policy) -> host-network server on its own node", toOwnNode)
	eventually(t, "node-1's host network -> p under podToNodeTraffic=policy (output is never filtered)", policyTimeout, fromNode("node-1"))
	e.setPodToNodeTraffic(t, "allow")
	eventually(t, "p (egress default-deny, podToNodeTraffic=allow again) -> host-network server on its own node", policyTimeout, toOwnNode)
}

// checkKubeProxyModeReported waits until every node's daemon publishes
// kube-proxy's mode as mode, with no policy problem.
func (e *labEnv) checkKubeProxyModeReported(t *testing.T, mode string) {
	t.Helper()
	eventually(t, "every daemon reports kube-proxy's "+mode+" mode and no policy problem", time.Minute, func(ctx context.Context) error {
		for _, name := range e.nodes {
			var n corev1.Node
			if err := e.c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
				return err
			}
			var st estuaryv1.NodeDaemonStatus
			if err := json.Unmarshal([]byte(n.Annotations[estuaryv1.AnnotationDaemonStatus]), &st); err != nil {
				return fmt.Errorf("node %s: daemon status: %w", name, err)
			}
			if st.Policy == nil || st.Policy.KubeProxyMode != mode || st.Policy.Problem != "" {
				return fmt.Errorf("node %s: policy status %+v", name, st.Policy)
			}
		}
		return nil
	})
}

// setPodToNodeTraffic upgrades the release with
// networkPolicy.podToNodeTraffic=value (the lab's values otherwise) and
// waits until every daemon runs with it. Set to policy, the release is
// put back to allow when the test ends, whatever its outcome.
func (e *labEnv) setPodToNodeTraffic(t *testing.T, value string) {
	t.Helper()
	upgrade := func(value string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		_, err := e.helm(ctx, "upgrade", lab.EstuaryRelease, e.estuary.Chart, "--version", e.estuary.ChartVersion,
			"--plain-http", "-n", lab.EstuaryNamespace, "--values", e.estuary.Values,
			"--set", "networkPolicy.podToNodeTraffic="+value, "--wait", "--timeout", "8m")
		return err
	}
	start := time.Now()
	if err := upgrade(value); err != nil {
		t.Fatalf("helm upgrade with podToNodeTraffic=%s: %v", value, err)
	}
	if value != "allow" {
		t.Cleanup(func() {
			if err := upgrade("allow"); err != nil {
				t.Errorf("helm upgrade back to podToNodeTraffic=allow: %v", err)
			}
		})
	}
	arg := "--pod-to-node-traffic=" + value
	eventually(t, "every daemon runs with "+arg, 5*time.Minute, func(ctx context.Context) error {
		pods, err := e.systemPods(ctx, daemonName, "")
		if err != nil {
			return err
		}
		live := 0
		for _, p := range pods {
			if !slices.Contains(p.Spec.Containers[0].Args, arg) || !podReady(&p) || p.DeletionTimestamp != nil {
				return fmt.Errorf("daemon pod %s: ready %v, args %v", p.Name, podReady(&p), p.Spec.Containers[0].Args)
			}
			live++
		}
		if live < nodeCount {
			return fmt.Errorf("%d of %d daemons", live, nodeCount)
		}
		return nil
	})
	t.Logf("podToNodeTraffic=%s rolled out in %s", value, time.Since(start).Round(time.Second))
}
