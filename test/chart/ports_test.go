package chart

import (
	"maps"
	"net"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/estuary-cni/estuary/internal/daemon"
	"github.com/estuary-cni/estuary/internal/manager"
)

// estuaryPorts is estuary's own block of node ports, by container and port
// name, as the chart takes them by default.
var estuaryPorts = map[string]map[string]int32{
	"manager": {"metrics": 9780, "health": 9781},
	"daemon":  {"health": 9782, "metrics": 9783},
}

// commonPorts are application ports estuary must leave free on the nodes:
// among them the upstream Kubernetes e2e tests' hostNetwork netserver pods'
// (8083/TCP, 8081/UDP, 8082/SCTP) and the usual HTTP alternatives.
var commonPorts = []int32{80, 443, 8000, 8080, 8081, 8082, 8083, 8443, 9090, 9100}

// TestDefaultHostPortsAreEstuarysBlock: both components run in the node's
// network, so their container ports are host ports. By default they are
// 9780-9783 (the webhook's port aside) and none is a common application
// port, and the components' own flag defaults are the same ports.
func TestDefaultHostPortsAreEstuarysBlock(t *testing.T) {
	objs := render(t)
	var d appsv1.Deployment
	convert(t, find(t, objs, "Deployment", "estuary-manager"), &d)
	var ds appsv1.DaemonSet
	convert(t, find(t, objs, "DaemonSet", "estuary-daemon"), &ds)
	for what, spec := range map[string]corev1.PodSpec{"manager": d.Spec.Template.Spec, "daemon": ds.Spec.Template.Spec} {
		if !spec.HostNetwork {
			t.Errorf("%s: not in the node's network; this test assumes its ports are host ports", what)
		}
		got := map[string]int32{}
		for _, p := range spec.Containers[0].Ports {
			if p.Name != "webhook" {
				got[p.Name] = p.ContainerPort
			}
			for _, common := range commonPorts {
				if p.ContainerPort == common || p.HostPort == common {
					t.Errorf("%s: port %s takes %d/%s on every node it runs on", what, p.Name, common, p.Protocol)
				}
			}
		}
		if want := estuaryPorts[what]; !maps.Equal(got, want) {
			t.Errorf("%s: ports %v, want %v", what, got, want)
		}
	}
	for _, f := range []struct{ flag, def, component, port string }{
		{"manager --metrics-bind-address", manager.DefaultMetricsAddr, "manager", "metrics"},
		{"manager --health-probe-bind-address", manager.DefaultProbeAddr, "manager", "health"},
		{"daemon --health-probe-bind-address", daemon.DefaultHealthAddress, "daemon", "health"},
	} {
		_, port, err := net.SplitHostPort(f.def)
		if err != nil {
			t.Fatalf("%s default %q: %v", f.flag, f.def, err)
		}
		if want := strconv.Itoa(int(estuaryPorts[f.component][f.port])); port != want {
			t.Errorf("%s defaults to %q; the chart's %s %s port is %s", f.flag, f.def, f.component, f.port, want)
		}
	}
}
