//go:build lab

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/estuary-cni/estuary/internal/nsrun"
)

// connectStorm connects to addr over TCP from a pod's namespace in a tight
// loop, with several connections in flight, until stop closes, and counts
// the connections that were established (the target's server answered)
// and those refused (the target's stack answered before its server
// listened).
type connectStorm struct {
	attempts, connected, refused atomic.Int64
	wg                           sync.WaitGroup
}

func startStorm(nsPath, addr string, workers int, stop <-chan struct{}) *connectStorm {
	s := &connectStorm{}
	for range workers {
		s.wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				s.attempts.Add(1)
				err := nsrun.Do(nsPath, func() error {
					c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
					if err == nil {
						_ = c.Close()
					}
					return err
				})
				switch {
				case err == nil:
					s.connected.Add(1)
				case errors.Is(err, syscall.ECONNREFUSED):
					s.refused.Add(1)
					time.Sleep(5 * time.Millisecond) // an answer, not a drop: do not spin
				}
			}
		})
	}
	return s
}

func (s *connectStorm) String() string {
	return fmt.Sprintf("%d attempts, %d connected, %d refused", s.attempts.Load(), s.connected.Load(), s.refused.Load())
}

// TestNewPodIsolatedBeforeItStarts: under an ingress default-deny
// NetworkPolicy, a new pod is isolated from its first moment: two clients
// (one on another node, one on the pod's own) connect to its address in a
// tight loop from the moment the manager assigns it, and no connection is
// established while the pod starts, serves and becomes Ready (its
// readiness probe, the kubelet's, passes under the deny); once a policy
// admits the clients, they connect.
func TestNewPodIsolatedBeforeItStarts(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "policy-admit")
	client := map[string]string{"role": "client"}
	e.mustCreate(t, ns, netexecPod("a", "node-1", client), netexecPod("b", "node-2", client))
	pods := e.waitPods(t, ns, "a", "b")
	a, b := pods["a"], pods["b"]
	aNS, bNS := e.podNetns(t, &a), e.podNetns(t, &b)
	ctx := testCtx(t, 10*time.Minute)

	deny := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deny-ingress"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if err := e.c.Create(ctx, deny); err != nil {
		t.Fatal(err)
	}
	refused(t, "a -> b HTTP under the deny (node-2's daemon has it)", func(ctx context.Context) error {
		_, err := dialFrom(ctx, aNS, "http", "hostname", b.Status.PodIP, httpPort)
		return err
	})

	target := netexecPod("t", "node-2", map[string]string{"app": "target"})
	target.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(httpPort)}},
		PeriodSeconds: 1,
	}
	e.mustCreate(t, ns, target)
	var addr string
	eventually(t, "the manager assigns t an address", time.Minute, func(ctx context.Context) error {
		ipi, err := e.podInstance(ctx, ns, "t")
		if err != nil {
			return err
		}
		addr = instanceAddr(ipi)
		return nil
	})
	hostPort := net.JoinHostPort(addr, strconv.Itoa(httpPort))
	stop := make(chan struct{})
	halt := sync.OnceFunc(func() { close(stop) })
	t.Cleanup(halt)
	fromA, fromB := startStorm(aNS, hostPort, 4, stop), startStorm(bNS, hostPort, 4, stop)
	t.Logf("connecting to t at %s from a (node-1) and b (node-2)", hostPort)
	e.waitPods(t, ns, "t")      // Ready: its server answers the kubelet's probe under the deny
	time.Sleep(5 * time.Second) // an observation window: t serves, and the clients keep knocking
	halt()
	fromA.wg.Wait()
	fromB.wg.Wait()
	t.Logf("while t started under the deny: from a: %v; from b: %v", fromA, fromB)
	if n := fromA.connected.Load() + fromB.connected.Load(); n != 0 {
		t.Fatalf("%d connections to the new pod were established under the ingress default-deny (a: %v; b: %v)", n, fromA, fromB)
	}
	if fromA.attempts.Load() < 20 || fromB.attempts.Load() < 20 {
		t.Fatalf("too few attempts to mean anything (a: %v; b: %v)", fromA, fromB)
	}

	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(httpPort)
	allow := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allow-clients"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "target"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: client}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		}}
	if err := e.c.Create(ctx, allow); err != nil {
		t.Fatal(err)
	}
	for name, nsPath := range map[string]string{"a": aNS, "b": bNS} {
		eventually(t, name+" -> t HTTP answered under the allow", policyTimeout, func(ctx context.Context) error {
			_, err := httpGet(ctx, nsPath, "http://"+hostPort+"/hostname")
			return err
		})
	}
}
