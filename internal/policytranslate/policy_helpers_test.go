package policytranslate

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

// The fixture of the policy tests: namespaces a and c (team x), b (team
// y); local pods a/web and a/db; remote pods b/client, c/client; a
// host-network pod and a finished pod in b that must never be peers.
func fixture() PolicyInput {
	return PolicyInput{
		Endpoints: []PolicyEndpoint{
			{HostVeth: "v-web", Addrs: addrs("10.0.0.1", "fd00::1"), Namespace: "a", Name: "web"},
			{HostVeth: "v-db", Addrs: addrs("10.0.0.2"), Namespace: "a", Name: "db"},
		},
		Namespaces: []corev1.Namespace{ns("a", "team=x"), ns("b", "team=y"), ns("c", "team=x")},
		Pods: []corev1.Pod{
			// a/web's IPv6 address is only in its endpoint: the API has
			// not shown it yet.
			pod("a", "web", "app=web", []string{"10.0.0.1"}, cport("http", "TCP", 8080), cport("dns", "UDP", 53)),
			pod("a", "db", "app=db", []string{"10.0.0.2"}, cport("http", "TCP", 9090)),
			pod("b", "client", "app=client", []string{"10.0.1.1"}, cport("http", "TCP", 80)),
			pod("c", "client", "app=client", []string{"10.0.2.1"}),
			hostNet(pod("b", "host", "app=client", []string{"192.168.0.1"}, cport("http", "TCP", 80))),
			finished(pod("b", "done", "app=client", []string{"10.0.1.9"}, cport("http", "TCP", 80))),
		},
	}
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// lbls parses "k=v,k2=v2".
func lbls(s string) map[string]string {
	if s == "" {
		return nil
	}
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func sel(s string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: lbls(s)}
}

func ns(name, labels string) corev1.Namespace {
	return corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls(labels)}}
}

func pod(namespace, name, labels string, ips []string, ports ...corev1.ContainerPort) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: lbls(labels)}}
	p.Spec.Containers = []corev1.Container{{Name: "c", Ports: ports}}
	p.Status.Phase = corev1.PodRunning
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	return p
}

func hostNet(p corev1.Pod) corev1.Pod { p.Spec.HostNetwork = true; return p }

func finished(p corev1.Pod) corev1.Pod { p.Status.Phase = corev1.PodSucceeded; return p }

func cport(name, proto string, n int32) corev1.ContainerPort {
	return corev1.ContainerPort{Name: name, Protocol: corev1.Protocol(proto), ContainerPort: n}
}

// netpolicy is a NetworkPolicy of namespace/name selecting podSel.
func netpolicy(namespace, name, podSel string) networkingv1.NetworkPolicy {
	return networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel(podSel)}}
}

func npPort(proto string, port any, end ...int32) networkingv1.NetworkPolicyPort {
	var p networkingv1.NetworkPolicyPort
	if proto != "" {
		pr := corev1.Protocol(proto)
		p.Protocol = &pr
	}
	switch v := port.(type) {
	case int:
		ios := intstr.FromInt32(int32(v))
		p.Port = &ios
	case string:
		ios := intstr.FromString(v)
		p.Port = &ios
	}
	if len(end) > 0 {
		p.EndPort = &end[0]
	}
	return p
}

// hosts is the peers of these single addresses.
func hosts(ss ...string) policy.Peers {
	var p policy.Peers
	for _, a := range addrs(ss...) {
		p.Blocks = append(p.Blocks, policy.Block{CIDR: netip.PrefixFrom(a, a.BitLen())})
	}
	slices.SortFunc(p.Blocks, func(a, b policy.Block) int { return a.CIDR.Compare(b.CIDR) })
	return p
}

func tcp(from uint16) policy.Port { return policy.Port{Protocol: policy.TCP, From: from} }

// endpoint is the translated endpoint of veth in n.
func endpoint(n policy.Node, veth string) (policy.Endpoint, bool) {
	for _, e := range n.Endpoints {
		if e.HostVeth == veth {
			return e, true
		}
	}
	return policy.Endpoint{}, false
}
