//go:build lab

package e2e_test

// How long pods wait for an address when the manager's leader goes. Each
// round waits until both replicas are available, kills the leader, at
// once creates a pod and measures until the pod has its address: the
// standby's takeover of the Lease, its allocator's rebuild and one
// allocation. Two ways to go: the leader's pod deleted (it shuts down and
// releases the Lease) and its container killed with SIGKILL (a crash: the
// standby waits for the Lease to expire). make test runs
// failoverRoundsDefault rounds of each; `make bench-failover` runs 20
// (ESTUARY_E2E_FAILOVER_ROUNDS) and docs/benchmarks.md#manager-failover
// records the percentiles.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const failoverRoundsDefault = 2

// TestManagerFailover measures leader kill -> next pod's address.
func TestManagerFailover(t *testing.T) {
	e := needLab(t)
	rounds := failoverRoundsDefault
	if v := os.Getenv("ESTUARY_E2E_FAILOVER_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ESTUARY_E2E_FAILOVER_ROUNDS=%q: want a positive integer", v)
		}
		rounds = n
	}
	e.waitManagersReady(t)
	eventually(t, "every manager replica serves the webhook", time.Minute, func(ctx context.Context) error {
		var list discoveryv1.EndpointSliceList
		if err := e.c.List(ctx, &list, client.InNamespace(systemNS), client.MatchingLabels{discoveryv1.LabelServiceName: "estuary-webhook"}); err != nil {
			return err
		}
		ready := 0
		for _, s := range list.Items {
			for _, ep := range s.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					ready++
				}
			}
		}
		if ready != 2 {
			return fmt.Errorf("the webhook Service has %d ready endpoints, want both replicas", ready)
		}
		return nil
	})
	ns := e.newNamespace(t, "failover")
	for _, mode := range []struct {
		name      string
		deletePod bool
	}{{"pod deleted", true}, {"container killed", false}} {
		var took []time.Duration
		for i := range rounds {
			killed := e.killLeader(t, mode.deletePod)
			start := time.Now()
			name := fmt.Sprintf("f-%t-%d", mode.deletePod, i)
			e.mustCreate(t, ns, pausePod(name, "node-3", nil))
			eventually(t, "pod "+name+" has an address", 3*time.Minute, func(ctx context.Context) error {
				var p corev1.Pod
				if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
					return err
				}
				if p.Status.PodIP == "" {
					return fmt.Errorf("pod %s has no address", name)
				}
				return nil
			})
			took = append(took, time.Since(start))
			if !mode.deletePod {
				// A fresh replica, not the crashed one restarted: the
				// kubelet's back-off would grow with every round.
				if err := e.c.Delete(testCtx(t, time.Minute), killed); err != nil && !apierrors.IsNotFound(err) {
					t.Fatal(err)
				}
			}
			_ = e.c.Delete(testCtx(t, time.Minute), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		}
		slices.Sort(took)
		t.Logf("manager failover, leader's %s: %d rounds, next pod's address p50 %s, p99 %s, max %s", mode.name, rounds,
			percentile(took, 50).Round(10*time.Millisecond), percentile(took, 99).Round(10*time.Millisecond), took[len(took)-1].Round(10*time.Millisecond))
	}
}

// percentile returns the p-th percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	i := (p*len(sorted) + 99) / 100
	return sorted[max(i-1, 0)]
}
