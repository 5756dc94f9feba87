package chart

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// daemonHealth returns the rendered daemon's --health-probe-bind-address
// and its container.
func daemonHealth(t *testing.T, objs []*unstructured.Unstructured) (string, *corev1.Container) {
	t.Helper()
	var ds appsv1.DaemonSet
	convert(t, find(t, objs, "DaemonSet", "estuary-daemon"), &ds)
	c := &ds.Spec.Template.Spec.Containers[0]
	var addr string
	n := 0
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--health-probe-bind-address="); ok {
			addr, n = v, n+1
		}
	}
	if n != 1 {
		t.Fatalf("daemon args %v hold --health-probe-bind-address %d times, want once", c.Args, n)
	}
	return addr, c
}

// The daemon's health server, which serves /endpoints (every pod of the
// node) and /bgp, binds the node's loopback unless daemon.bindAddress
// explicitly opens it, also when the value is empty; the kubelet's probes
// reach it where it binds.
func TestDaemonHealthBindsLoopback(t *testing.T) {
	sets := renders(t) // default, lab, dual-stack
	for name, args := range map[string][]string{
		"empty":          {"--set", "daemon.bindAddress="},
		"null":           {"--set", "daemon.bindAddress=null"},
		"IPv6 loopback":  {"--set", "daemon.bindAddress=::1"},
		"other loopback": {"--set", "daemon.bindAddress=127.0.0.2", "--set", "daemon.healthPort=9082"},
	} {
		sets[name] = render(t, args...)
	}
	for name, objs := range sets {
		addr, c := daemonHealth(t, objs)
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Errorf("%s: --health-probe-bind-address=%s: %v", name, addr, err)
			continue
		}
		if a, err := netip.ParseAddr(host); err != nil || !a.IsLoopback() {
			t.Errorf("%s: --health-probe-bind-address=%s binds %q, not the node's loopback", name, addr, host)
		}
		for what, probe := range map[string]struct {
			p    *corev1.Probe
			path string
		}{"liveness": {c.LivenessProbe, "/healthz"}, "readiness": {c.ReadinessProbe, "/readyz"}} {
			p := probe.p
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Host != host || p.HTTPGet.Port.String() != port || p.HTTPGet.Path != probe.path {
				t.Errorf("%s: %s probe %+v, want httpGet %s on %s port %s, where the daemon binds", name, what, p, probe.path, host, port)
			}
		}
	}
	for _, open := range []string{"0.0.0.0", "::"} {
		addr, c := daemonHealth(t, render(t, "--set", "daemon.bindAddress="+open))
		if want := net.JoinHostPort(open, "9782"); addr != want {
			t.Errorf("daemon.bindAddress=%s: --health-probe-bind-address=%s, want %s", open, addr, want)
		}
		for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
			if p == nil || p.HTTPGet == nil || p.HTTPGet.Host != "" {
				t.Errorf("daemon.bindAddress=%s: probe %+v, want httpGet without a host (the pod's address, the node's)", open, p)
			}
		}
	}
}
