//go:build lab

package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/test/infra/lab"
)

// The IPv6-only lab (make test-ipv6, ESTUARY_E2E_IP_FAMILY=ipv6): nodes,
// Services and pods have IPv6 addresses only, and the overlay tunnels over
// IPv6 (the nodes' VTEPs are their IPv6 switch addresses).

// onlyIPv6 requires p to have exactly one address, an IPv6 one in cidr, and
// returns it.
func onlyIPv6(t *testing.T, p *corev1.Pod, cidr netip.Prefix) string {
	t.Helper()
	if len(p.Status.PodIPs) != 1 {
		t.Fatalf("pod %s has podIPs %v, want one IPv6 address in %s", p.Name, p.Status.PodIPs, cidr)
	}
	a, err := netip.ParseAddr(p.Status.PodIPs[0].IP)
	if err != nil || !a.Is6() || !cidr.Contains(a) {
		t.Fatalf("pod %s has address %q, want one in %s (%v)", p.Name, p.Status.PodIPs[0].IP, cidr, err)
	}
	return a.String()
}

// TestIPv6OnlyOverlay: on an IPv6-only lab every node's VXLAN device
// tunnels from its IPv6 switch address; netexec pods on node-1 and node-2
// get one overlay-v6 address each, recorded by one IPInstance; they reach
// each other (HTTP, UDP, ICMPv6) seeing each other's own address; node-3
// reaches the pod on node-2 and is seen by its own address; the pod on
// node-1 reaches the external host, which sees node-1's address.
func TestIPv6OnlyOverlay(t *testing.T) {
	e := needFamily(t, "ipv6")
	plan := e.families[0]
	cidr := netip.MustParsePrefix(plan.OverlaySubnet)
	for _, node := range e.nodes {
		out, err := e.run(testCtx(t, time.Minute), node, "ip", "-d", "link", "show", vxlanDevice)
		if err != nil {
			t.Fatalf("%s: ip link show %s: %v", node, vxlanDevice, err)
		}
		if want := "local " + plan.Nodes[node] + " "; !strings.Contains(out, want) {
			t.Errorf("%s: %s does not tunnel from its IPv6 address (%q not in):\n%s", node, vxlanDevice, want, out)
		}
	}
	ns := e.newNamespace(t, "v6-overlay")
	e.mustCreate(t, ns, netexecPod("a", "node-1", nil), netexecPod("b", "node-2", nil))
	pods := e.waitPods(t, ns, "a", "b")
	a, b := pods["a"], pods["b"]
	addr := map[string]string{"a": onlyIPv6(t, &a, cidr), "b": onlyIPv6(t, &b, cidr)}
	for _, p := range []*corev1.Pod{&a, &b} {
		e.checkRecordsBySubnet(t, p, map[string]string{"overlay-v6": addr[p.Name]})
	}
	netns := map[string]string{"a": e.podNetns(t, &a), "b": e.podNetns(t, &b)}
	for _, c := range []struct{ src, dst string }{{"a", "b"}, {"b", "a"}} {
		t.Run(c.src+" to "+c.dst, func(t *testing.T) {
			what := fmt.Sprintf("%s (%s) -> %s (%s)", c.src, addr[c.src], c.dst, addr[c.dst])
			checkClientIPFrom(t, what, netns[c.src], addr[c.dst], httpPort, addr[c.src])
			var host string
			eventually(t, what+": UDP hostname", reachTimeout, func(ctx context.Context) error {
				var err error
				host, err = dialFrom(ctx, netns[c.src], "udp", "hostname", addr[c.dst], udpPort)
				return err
			})
			if host != c.dst {
				t.Errorf("%s: UDP hostname answered %q, want %q", what, host, c.dst)
			}
			checkPing6(t, what, netns[c.src], addr[c.dst], 5)
		})
	}
	t.Run("node-3 to b keeps the node address", func(t *testing.T) {
		u := fmt.Sprintf("http://%s/clientip", net.JoinHostPort(addr["b"], strconv.Itoa(httpPort)))
		var seen string
		eventually(t, "node-3 -> "+u, reachTimeout, func(ctx context.Context) error {
			var err error
			seen, err = httpGet(ctx, e.nodeNetns["node-3"], u)
			return err
		})
		if want := plan.Nodes["node-3"]; hostOf(seen) != want {
			t.Errorf("pod b saw node-3 as %s, want %s (node to pod must not be NATed)", seen, want)
		}
	})
	t.Run("a to the external host is masqueraded", func(t *testing.T) {
		port := serveClientIPAnyPort(t, e.externalNetns, plan.External)
		checkClientIPFrom(t, "a -> external "+plan.External, netns["a"], plan.External, port, plan.Nodes["node-1"])
	})
}

// TestIPv6OnlyServices: a ClusterIP Service of an IPv6-only cluster gets an
// address in the IPv6 Service range and reaches its backends from a pod on
// another node, by address and by name (the cluster DNS answers AAAA), and a
// NodePort answers on a node's IPv6 address from another node.
func TestIPv6OnlyServices(t *testing.T) {
	e := needFamily(t, "ipv6")
	plan := e.families[0]
	ns := e.newNamespace(t, "v6-svc")
	sel := map[string]string{"app": "v6-backend"}
	e.mustCreate(t, ns, netexecPod("backend-1", "node-1", sel), netexecPod("backend-2", "node-2", sel), netexecPod("client", "node-3", nil))
	svc := &corev1.Service{}
	svc.Name, svc.Namespace = "web", ns
	svc.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: sel,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(httpPort)}}}
	if err := e.c.Create(testCtx(t, time.Minute), svc); err != nil {
		t.Fatalf("create service: %v", err)
	}
	if err := e.c.Get(testCtx(t, time.Minute), client.ObjectKeyFromObject(svc), svc); err != nil {
		t.Fatal(err)
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil || !netip.MustParsePrefix(plan.ServiceCIDR).Contains(ip) || len(svc.Spec.ClusterIPs) != 1 {
		t.Fatalf("service ClusterIPs %v, want one in %s", svc.Spec.ClusterIPs, plan.ServiceCIDR)
	}
	pods := e.waitPods(t, ns, "backend-1", "backend-2", "client")
	cl := pods["client"]
	clientNS := e.podNetns(t, &cl)
	t.Run("ClusterIP", func(t *testing.T) { checkServiceAnswers(t, clientNS, "client", ip.String()) })
	t.Run("DNS AAAA", func(t *testing.T) {
		e.waitResolvesType(t, ns, "client", "AAAA", "web."+ns+".svc."+lab.ClusterDomain, ip.String())
	})
	t.Run("NodePort on a node's IPv6 address", func(t *testing.T) {
		u := fmt.Sprintf("http://%s/hostname", net.JoinHostPort(plan.Nodes["node-2"], strconv.Itoa(int(svc.Spec.Ports[0].NodePort))))
		eventually(t, "node-1 -> "+u, reachTimeout, func(ctx context.Context) error {
			host, err := httpGet(ctx, e.nodeNetns["node-1"], u)
			if err == nil && !strings.HasPrefix(host, "backend-") {
				return fmt.Errorf("answered %q, want a backend's hostname", host)
			}
			return err
		})
	})
}
