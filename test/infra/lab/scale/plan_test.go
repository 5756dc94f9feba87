package scale

import (
	"net/netip"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/clientgates"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
)

// TestFakeNodeLooksLikeAnEstuaryNode: a fake node carries what a real
// node's daemon publishes (vtep-ip equal to its InternalIP, the MAC the
// daemon derives from its name), kwok's annotation and taint, a domain,
// room for 110 pods, and addresses of its own outside the lab's ranges.
func TestFakeNodeLooksLikeAnEstuaryNode(t *testing.T) {
	seen := map[string]bool{}
	for _, i := range []int{0, 1, 999, 1002} {
		n, err := fakeNode(i)
		if err != nil {
			t.Fatal(err)
		}
		ip := n.Annotations[estuaryv1.AnnotationVTEPIP]
		if n.Status.Addresses[0].Type != corev1.NodeInternalIP || n.Status.Addresses[0].Address != ip {
			t.Errorf("%s: InternalIP %v, vtep-ip %s; want equal", n.Name, n.Status.Addresses, ip)
		}
		if a := netip.MustParseAddr(ip); !fakeNodeIPs.Contains(a) || seen[ip] {
			t.Errorf("%s: vtep-ip %s outside %s or taken twice", n.Name, ip, fakeNodeIPs)
		}
		seen[ip] = true
		if got, want := n.Annotations[estuaryv1.AnnotationVTEPMAC], overlay.StableMAC(n.Name).String(); got != want {
			t.Errorf("%s: vtep-mac %s, want %s", n.Name, got, want)
		}
		if n.Annotations[kwokAnnotation] != kwokValue || len(n.Spec.Taints) != 1 || n.Labels[fakeLabel] != fakeValue {
			t.Errorf("%s: not marked for kwok: %v %v %v", n.Name, n.Annotations, n.Spec.Taints, n.Labels)
		}
		if want := []string{"a", "b"}[i%2]; n.Labels[domainLabel] != want {
			t.Errorf("%s: domain %q, want %q", n.Name, n.Labels[domainLabel], want)
		}
		if p := n.Status.Allocatable.Pods().Value(); p != maxPodsPerNode {
			t.Errorf("%s: %d pods allocatable, want %d", n.Name, p, maxPodsPerNode)
		}
		if c := netip.MustParsePrefix(n.Spec.PodCIDR); !fakePodCIDRs.Contains(c.Addr()) || c.Bits() != 24 {
			t.Errorf("%s: podCIDR %s, want a /24 of %s", n.Name, c, fakePodCIDRs)
		}
	}
	if _, err := fakeNode(70000); err == nil {
		t.Error("fake node 70000: no error, want its address past 10.90.0.0/16")
	}
}

// TestDeploymentsSpreadOverTheThreeNetworks: deployment i takes the
// overlay, underlay a or b by i mod 3, and its pods only fit fake nodes.
func TestDeploymentsSpreadOverTheThreeNetworks(t *testing.T) {
	for i, want := range []string{"", underlays[0].network, underlays[1].network, ""} {
		d := deployment("scale", "d", i, 5)
		if got := d.Spec.Template.Annotations[estuaryv1.AnnotationNetwork]; got != want {
			t.Errorf("deployment %d: network %q, want %q", i, got, want)
		}
		ps := d.Spec.Template.Spec
		if ps.NodeSelector[fakeLabel] != fakeValue || len(ps.Tolerations) != 1 || ps.Tolerations[0].Key != kwokAnnotation {
			t.Errorf("deployment %d: selector %v tolerations %v, want the fake nodes only", i, ps.NodeSelector, ps.Tolerations)
		}
	}
}

// TestStormRates: latencies per step, the rate over the wave and the
// sustained rate between the 10th and 90th percentile of Bound.
func TestStormRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var ts []podTimes
	for i := range 100 {
		c := t0.Add(time.Duration(i) * 10 * time.Millisecond) // 100 pods/s
		ts = append(ts, podTimes{created: c, scheduled: c.Add(20 * time.Millisecond), bound: c.Add(50 * time.Millisecond)})
	}
	ts = append(ts, podTimes{created: t0}) // never bound: left out
	s := stormOf(ts)
	if s.pods != 100 {
		t.Fatalf("pods %d, want 100", s.pods)
	}
	if s.createdToBound.p50 != 50*time.Millisecond || s.scheduledToBound.p99 != 30*time.Millisecond {
		t.Errorf("latencies %v / %v, want 50ms and 30ms", s.createdToBound, s.scheduledToBound)
	}
	if s.sustained < 99 || s.sustained > 101 {
		t.Errorf("sustained %.1f pods/s, want 100", s.sustained)
	}
	if want := 100 / 1.04; s.rate < want-1 || s.rate > want+1 {
		t.Errorf("rate %.1f pods/s, want %.1f", s.rate, want)
	}
}

func TestSetFlagReplacesOrAppends(t *testing.T) {
	got := setFlag([]string{"--a=1", "--kube-client-qps=20"}, "--kube-client-qps", "300")
	if got[1] != "--kube-client-qps=300" || len(got) != 2 {
		t.Errorf("replace: %v", got)
	}
	if got := setFlag([]string{"--a=1"}, "--b", "2"); len(got) != 2 || got[1] != "--b=2" {
		t.Errorf("append: %v", got)
	}
}

func TestSetEnvReplacesOrAppends(t *testing.T) {
	env := []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: clientgates.EnvWatchList, Value: "false"}}
	got := setEnv(env, clientgates.EnvWatchList, "true")
	if len(got) != 2 || got[1].Value != "true" || got[0].Value != "1" {
		t.Errorf("replace: %v", got)
	}
	if got := setEnv(nil, "B", "2"); len(got) != 1 || got[0] != (corev1.EnvVar{Name: "B", Value: "2"}) {
		t.Errorf("append: %v", got)
	}
}
