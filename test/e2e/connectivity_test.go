//go:build lab

package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const reachTimeout = 2 * time.Minute

// TestPodToPodSameNodeAndAcrossNodes: pod a on node-1 reaches b on node-1
// and c on node-2 over HTTP, UDP and ICMP, and the peer sees a's own
// address (pod to pod is not NATed).
func TestPodToPodSameNodeAndAcrossNodes(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "pod2pod")
	e.mustCreate(t, ns, netexecPod("a", "node-1", nil), netexecPod("b", "node-1", nil), netexecPod("c", "node-2", nil))
	pods := e.waitPods(t, ns, "a", "b", "c")
	a := pods["a"]
	srcNS := e.podNetns(t, &a)
	for _, peer := range []struct{ name, where string }{{"b", "same node"}, {"c", "across nodes"}} {
		t.Run(peer.where, func(t *testing.T) {
			dst := pods[peer.name]
			checkPodReachesPod(t, srcNS, &a, &dst)
		})
	}
}

func checkPodReachesPod(t *testing.T, srcNS string, src, dst *corev1.Pod) {
	route := fmt.Sprintf("%s (%s, %s) -> %s (%s, %s)", src.Name, src.Status.PodIP, src.Spec.NodeName, dst.Name, dst.Status.PodIP, dst.Spec.NodeName)
	var seen string
	eventually(t, route+": HTTP /clientip answered", reachTimeout, func(ctx context.Context) error {
		var err error
		seen, err = dialFrom(ctx, srcNS, "http", "clientip", dst.Status.PodIP, httpPort)
		return err
	})
	if hostOf(seen) != src.Status.PodIP {
		t.Errorf("%s: the peer saw the HTTP client as %s, want the pod's own address %s (pod to pod must not be NATed)", route, seen, src.Status.PodIP)
	}
	var host string
	eventually(t, route+": UDP hostname answered", reachTimeout, func(ctx context.Context) error {
		var err error
		host, err = dialFrom(ctx, srcNS, "udp", "hostname", dst.Status.PodIP, udpPort)
		return err
	})
	if host != dst.Name {
		t.Errorf("%s: UDP hostname answered %q, want %q", route, host, dst.Name)
	}
	checkPing(t, route, srcNS, dst.Status.PodIP, 5)
}

// TestNodeToPodKeepsNodeAddress: node-1 reaches a pod on node-2 and the pod
// sees node-1's own underlay address as the source.
func TestNodeToPodKeepsNodeAddress(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "node2pod")
	e.mustCreate(t, ns, netexecPod("server", "node-2", nil))
	pod := e.waitPods(t, ns, "server")["server"]
	u := fmt.Sprintf("http://%s:%d/clientip", pod.Status.PodIP, httpPort)
	var seen string
	eventually(t, "node-1 -> "+u, reachTimeout, func(ctx context.Context) error {
		var err error
		seen, err = httpGet(ctx, e.nodeNetns["node-1"], u)
		return err
	})
	if want := e.nodeAddr["node-1"]; hostOf(seen) != want {
		t.Errorf("pod %s on node-2 saw node-1 as %s, want node-1's address %s", pod.Name, seen, want)
	}
}

// TestPodToExternalIsMasqueradedToNodeAddress: a pod on node-2 reaches the
// external host, which sees node-2's underlay address (natOutgoing).
func TestPodToExternalIsMasqueradedToNodeAddress(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "egress")
	serveClientIP(t, e.externalNetns, fmt.Sprintf("%s:%d", e.externalAddr, externalPort))
	e.mustCreate(t, ns, netexecPod("client", "node-2", nil))
	pod := e.waitPods(t, ns, "client")["client"]
	podNS := e.podNetns(t, &pod)
	var seen string
	eventually(t, fmt.Sprintf("pod %s on node-2 -> external %s:%d", pod.Name, e.externalAddr, externalPort), reachTimeout, func(ctx context.Context) error {
		var err error
		seen, err = dialFrom(ctx, podNS, "http", "clientip", e.externalAddr, externalPort)
		return err
	})
	if want := e.nodeAddr["node-2"]; hostOf(seen) != want {
		t.Errorf("the external host saw pod %s (%s) as %s, want node-2's address %s (overlay-v4 has natOutgoing)", pod.Name, pod.Status.PodIP, seen, want)
	}
}

// TestClusterIPServiceFromEveryNode: a ClusterIP Service over two netexec
// pods answers a client pod on every node with one of its backends' names.
func TestClusterIPServiceFromEveryNode(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "svc")
	backend := map[string]string{"app": "backend"}
	e.mustCreate(t, ns, netexecPod("backend-1", "node-1", backend), netexecPod("backend-2", "node-2", backend))
	var clients []string
	for _, n := range e.nodes {
		clients = append(clients, "client-"+n)
		e.mustCreate(t, ns, netexecPod("client-"+n, n, nil))
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backend"},
		Spec: corev1.ServiceSpec{Selector: backend, Ports: []corev1.ServicePort{
			{Name: "http", Port: 80, TargetPort: intstr.FromInt32(httpPort)},
		}},
	}
	if err := e.c.Create(testCtx(t, time.Minute), svc); err != nil {
		t.Fatalf("create service backend: %v", err)
	}
	e.waitPods(t, ns, "backend-1", "backend-2")
	pods := e.waitPods(t, ns, clients...)
	for _, name := range clients {
		t.Run(name, func(t *testing.T) {
			c := pods[name]
			checkServiceAnswers(t, e.podNetns(t, &c), name, svc.Spec.ClusterIP)
		})
	}
}

func checkServiceAnswers(t *testing.T, podNS, client, clusterIP string) {
	var got string
	eventually(t, fmt.Sprintf("%s -> service %s:80", client, clusterIP), reachTimeout, func(ctx context.Context) error {
		var err error
		got, err = dialFrom(ctx, podNS, "http", "hostname", clusterIP, 80)
		return err
	})
	if !slices.Contains([]string{"backend-1", "backend-2"}, got) {
		t.Errorf("%s: service %s:80 answered with hostname %q, want backend-1 or backend-2", client, clusterIP, got)
	}
}
