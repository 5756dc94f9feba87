package policytranslate

import (
	"fmt"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

// benchInput is 100 namespaces of 100 pods (10,000 peers), 10
// NetworkPolicies per namespace (1,000), and one local pod per namespace
// (100). Each policy selects an app of its namespace and admits, on a
// port and a named port, a role of the namespaces of a team, and egress
// to its namespace's named port: an endpoint admits 200 peers.
func benchInput() PolicyInput {
	var in PolicyInput
	for n := range 100 {
		nsName := fmt.Sprintf("ns%d", n)
		in.Namespaces = append(in.Namespaces, ns(nsName, fmt.Sprintf("team=t%d", n%10)))
		for i := range 100 {
			ip := fmt.Sprintf("10.%d.%d.%d", n/100, n%100, i+1)
			in.Pods = append(in.Pods, pod(nsName, fmt.Sprintf("p%d", i), fmt.Sprintf("app=a%d,role=r%d", i%10, i%5), []string{ip}, cport("http", "TCP", int32(8000+i%3))))
			if i == 0 {
				in.Endpoints = append(in.Endpoints, PolicyEndpoint{HostVeth: fmt.Sprintf("v%d", n), Addrs: addrs(ip), Namespace: nsName, Name: "p0"})
			}
		}
		for k := range 10 {
			np := withIngress(netpolicy(nsName, fmt.Sprintf("np%d", k), fmt.Sprintf("app=a%d", k)), networkingv1.NetworkPolicyIngressRule{
				From:  from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel(fmt.Sprintf("team=t%d", k)), PodSelector: sel(fmt.Sprintf("role=r%d", k%5))}),
				Ports: []networkingv1.NetworkPolicyPort{npPort("", 443), npPort("", "http")}})
			np = withEgress(np, networkingv1.NetworkPolicyEgressRule{
				To: from(networkingv1.NetworkPolicyPeer{PodSelector: sel("")}), Ports: []networkingv1.NetworkPolicyPort{npPort("", "http")}})
			in.NetworkPolicies = append(in.NetworkPolicies, np)
		}
	}
	return in
}

func BenchmarkPolicy(b *testing.B) {
	in := benchInput()
	var n policy.Node
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if n, err = Policy(in); err != nil {
			b.Fatal(err)
		}
	}
	if len(n.Endpoints) != 100 || !n.Endpoints[0].Ingress.Isolated || len(n.Endpoints[0].Ingress.Allow[0].Peers.Blocks) != 200 {
		b.Fatalf("unexpected translation: %d endpoints", len(n.Endpoints))
	}
}
