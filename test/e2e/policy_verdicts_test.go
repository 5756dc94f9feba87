//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/estuary-cni/estuary/internal/policydrops"
)

// TestPolicyVerdictsOnTheLab: s on node-2 admits HTTP from role=client
// only. a (role=client, node-1) is answered and counts into the policy's
// accept counter on node-2; b (role=other, node-1) is dropped by
// isolation, counted, and its drop is served by node-2's daemon on
// /debug/policy/drops and printed by `estuary-daemon policy-drops -o json`
// in its pod, as kubectl estuary runs it.
func TestPolicyVerdictsOnTheLab(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "verdicts")
	e.mustCreate(t, ns, netexecPod("s", "node-2", map[string]string{"app": "server"}),
		netexecPod("a", "node-1", map[string]string{"role": "client"}),
		netexecPod("b", "node-1", map[string]string{"role": "other"}))
	pods := e.waitPods(t, ns, "s", "a", "b")
	s, a, b := pods["s"], pods["a"], pods["b"]
	aNS, bNS := e.podNetns(t, &a), e.podNetns(t, &b)
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
	if err := e.c.Create(testCtx(t, time.Minute), np); err != nil {
		t.Fatal(err)
	}
	sIP := s.Status.PodIP
	http := func(nsPath string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := dialFrom(ctx, nsPath, "http", "hostname", sIP, httpPort)
			return err
		}
	}
	refused(t, "b (role=other) -> s HTTP", http(bNS))
	eventually(t, "a (role=client) -> s HTTP answered", policyTimeout, http(aNS))

	health := "http://" + net.JoinHostPort("127.0.0.1", daemonHealthPort)
	node2 := e.nodeNetns["node-2"]
	series := func(kind, pol, verdict string) string {
		return fmt.Sprintf(`estuary_policy_packets_total{direction="ingress",kind=%q,policy=%q,verdict=%q} `, kind, pol, verdict)
	}
	for _, want := range []string{series("np", ns+"/server-from-clients", "accept"), series("isolation", "", "drop")} {
		eventually(t, "node-2 counts "+want, policyTimeout, func(ctx context.Context) error {
			body, err := httpGet(ctx, node2, health+"/metrics")
			if err != nil {
				return err
			}
			for _, l := range strings.Split(body, "\n") {
				if v, ok := strings.CutPrefix(l, want); ok && v != "0" {
					return nil
				}
			}
			return fmt.Errorf("no series %s above 0", want)
		})
	}

	isB := func(d policydrops.Drop) bool {
		return d.Direction == "ingress" && d.Src == b.Status.PodIP && d.Dst == sIP && d.DstPort == httpPort &&
			d.Protocol == "tcp" && d.Policy == "" && strings.HasPrefix(d.HostVeth, "est") && d.Pod == ns+"/s"
	}
	eventually(t, "node-2 serves b's drop", policyTimeout, func(ctx context.Context) error {
		body, err := httpGet(ctx, node2, health+"/debug/policy/drops")
		if err != nil {
			return err
		}
		return findDrop(body, "node-2", isB)
	})

	daemons, err := e.systemPods(testCtx(t, time.Minute), daemonName, "node-2")
	if err != nil || len(daemons) == 0 {
		t.Fatalf("node-2's daemon pod: %v (%d)", err, len(daemons))
	}
	out, err := e.podExec(testCtx(t, time.Minute), systemNS, daemons[0].Name, "/estuary-daemon", "policy-drops", "-o", "json",
		"--node-name", "node-2")
	if err != nil {
		t.Fatal(err)
	}
	if err := findDrop(out, "node-2", isB); err != nil {
		t.Errorf("estuary-daemon policy-drops -o json: %v", err)
	}
}

// findDrop decodes a policydrops.Report of node and looks for a drop ok
// accepts.
func findDrop(body, node string, ok func(policydrops.Drop) bool) error {
	var r policydrops.Report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		return fmt.Errorf("not a policydrops.Report: %w: %s", err, body)
	}
	if r.Node != node {
		return fmt.Errorf("report of node %q, want %s", r.Node, node)
	}
	for _, d := range r.Drops {
		if ok(d) {
			return nil
		}
	}
	return fmt.Errorf("none of %d drops (%d lost) is the one looked for: %+v", len(r.Drops), r.Lost, r.Drops)
}
