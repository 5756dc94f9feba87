//go:build lab

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// policyTimeout bounds how long a policy change may take to be enforced
// on the lab's nodes (the loop's settle delay plus one pass, and the
// informers' delivery).
const policyTimeout = 30 * time.Second

// refused waits until every probe of what fails: policy drops it.
func refused(t *testing.T, what string, probe func(ctx context.Context) error) {
	t.Helper()
	eventually(t, what+" is refused", policyTimeout, func(ctx context.Context) error {
		if err := probe(ctx); err == nil {
			return errors.New("answered")
		}
		return nil
	})
}

// pinged sends a short burst of echoes from nsPath to dst and fails unless
// every one is answered.
func pinged(nsPath, dst string) func(context.Context) error {
	return func(context.Context) error {
		lost, err := pingBurst(nsPath, dst, 5, 50*time.Millisecond)
		if err == nil && len(lost) > 0 {
			err = fmt.Errorf("echoes %v to %s unanswered", lost, dst)
		}
		return err
	}
}

// TestNetworkPolicyEnforcedOnTheLab: a NetworkPolicy admitting TCP 8080
// from pods labelled role=client to the server pod is enforced by the
// daemons, with the fast path on: a client on another node gets HTTP but
// not UDP or ping (echoes take the stack under policy, never the fast
// path), a pod without the label on the server's own node gets nothing;
// relabelling that pod admits it, and deleting the policy opens the
// server again.
func TestNetworkPolicyEnforcedOnTheLab(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "policy")
	e.mustCreate(t, ns, netexecPod("s", "node-2", map[string]string{"app": "server"}),
		netexecPod("a", "node-1", map[string]string{"role": "client"}),
		netexecPod("b", "node-2", map[string]string{"role": "other"}))
	pods := e.waitPods(t, ns, "s", "a", "b")
	s, a, b := pods["s"], pods["a"], pods["b"]
	aNS, bNS := e.podNetns(t, &a), e.podNetns(t, &b)
	checkPodReachesPod(t, aNS, &a, &s)
	checkPodReachesPod(t, bNS, &b, &s)

	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(httpPort)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "server-from-clients"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		}}
	ctx := testCtx(t, 5*time.Minute)
	if err := e.c.Create(ctx, np); err != nil {
		t.Fatal(err)
	}
	sIP := s.Status.PodIP
	http := func(nsPath string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := dialFrom(ctx, nsPath, "http", "hostname", sIP, httpPort)
			return err
		}
	}
	udp := func(nsPath string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := dialFrom(ctx, nsPath, "udp", "hostname", sIP, udpPort)
			return err
		}
	}
	refused(t, "b (role=other, same node) -> s HTTP", http(bNS))
	refused(t, "a (role=client, other node) -> s UDP", udp(aNS))
	refused(t, "a -> s ping", func(context.Context) error {
		lost, err := pingBurst(aNS, sIP, 5, 50*time.Millisecond)
		if err == nil && len(lost) == 5 {
			return errors.New("every echo lost")
		}
		return err
	})
	eventually(t, "a (role=client) -> s HTTP answered under the policy", policyTimeout, http(aNS))

	b.Labels = map[string]string{"role": "client"}
	if err := e.c.Update(ctx, &b); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b relabelled role=client -> s HTTP answered", policyTimeout, http(bNS))

	if err := e.c.Delete(ctx, np, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a -> s ping answered without the policy", policyTimeout, pinged(aNS, sIP))
	eventually(t, "a -> s UDP answered without the policy", policyTimeout, udp(aNS))
}
