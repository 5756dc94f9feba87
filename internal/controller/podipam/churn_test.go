package podipam

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/faultinject"
)

// TestRetainingChurnUnderLostAnswers churns a retaining Deployment's pods
// (half of them replaced every round, on two simulated nodes) and some
// bare pods beside them, while the manager loses the answer to every third
// IPInstance write after the API server stored it (creates, updates and
// deletes alike), audits every second, and is stopped and started again
// every fourth round. Each pod's ADD is the daemon's own wait (package
// ipwait), and the kubelet's report follows it. After every round every
// live pod's Bound records must be what its node set up, and no address
// may be set up in two live pods. The Deployment keeps spare addresses
// beyond its pods', so every new pod of it can take a kept one: at the end
// it must hold exactly the addresses it held at the start.
func TestRetainingChurnUnderLostAnswers(t *testing.T) {
	overlay(t, "ov-churn", "10.81.0.0/27")
	ns := newNamespace(t, nil)
	lossy := rest.CopyConfig(cfg)
	faultinject.LoseAnswers(lossy, 3, "ipinstances")
	start := func() func() {
		r, stop := startManagerWith(t, testManager{rc: lossy, audit: time.Second})
		eventually(t, "allocator rebuilt", func() error { return r.Ready() })
		return stop
	}
	stop := start()
	nodes := startNodes(t, "node-a", "node-b")
	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	rs := deployment(t, ns, "web", "a")
	const replicas, spare, rounds = 6, 3, 12
	seq := 0
	next := func(prefix string, opts ...podOpt) *corev1.Pod {
		seq++
		node := onNode([]string{"node-a", "node-b"}[seq%2])
		return newPod(t, ns, fmt.Sprintf("%s-%d", prefix, seq), append(opts, node, onNetwork("ov-churn"))...)
	}
	addAll := func(pods []*corev1.Pod) {
		t.Helper()
		if !nodes.addAll(t, len(pods), time.Minute, func(i int) *corev1.Pod { return pods[i] }) {
			t.FailNow()
		}
	}
	var web []*corev1.Pod
	for range replicas + spare {
		web = append(web, next("web", rs, retain))
	}
	addAll(web)
	first := webAddrs(t, ns)
	for _, p := range web[replicas:] {
		deletePod(t, p)
	}
	web = web[:replicas]
	eventually(t, fmt.Sprintf("%d addresses kept for Deployment web", spare), func() error {
		kept := 0
		for _, ipi := range recordsOwnedBy(t, ns, "Deployment", "web") {
			if ipi.Status.Phase == estuaryv1.IPInstanceRetained {
				kept++
			}
		}
		if kept != spare {
			return fmt.Errorf("%d kept", kept)
		}
		return nil
	})
	for round := range rounds {
		if round%4 == 3 {
			stop()
			stop = start()
		}
		var fresh []*corev1.Pod
		for i, p := range web {
			if i%2 == round%2 {
				deletePod(t, p)
				web[i] = next("web", rs, retain)
				fresh = append(fresh, web[i])
			}
		}
		bare := []*corev1.Pod{next("bare"), next("bare")}
		addAll(append(fresh, bare...))
		nodes.check(t, ns)
		for _, p := range bare {
			deletePod(t, p)
		}
	}
	requireUnique(t, allInstances(t, ns))
	eventually(t, "the Deployment holds the addresses it started with", func() error {
		if got := webAddrs(t, ns); !sameAddrs(got, first) {
			return fmt.Errorf("Deployment web holds %v, it started with %v", got, first)
		}
		return nil
	})
}

// webAddrs lists the addresses recorded for Deployment web in ns, in any
// phase.
func webAddrs(t *testing.T, ns string) []netip.Addr {
	t.Helper()
	return addrsOf(t, recordsOwnedBy(t, ns, "Deployment", "web"))
}

func sameAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
