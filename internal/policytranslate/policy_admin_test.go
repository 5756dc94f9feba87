package policytranslate

import (
	"net/netip"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

func cnp(name string, tier npv1beta1.Tier, prio int32, subjectNS string) npv1beta1.ClusterNetworkPolicy {
	return npv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: npv1beta1.ClusterNetworkPolicySpec{
		Tier: tier, Priority: prio, Subject: npv1beta1.ClusterNetworkPolicySubject{Namespaces: sel(subjectNS)}}}
}

func cnpIn(action string, peer npv1beta1.ClusterNetworkPolicyIngressPeer, protos ...npv1beta1.ClusterNetworkPolicyProtocol) npv1beta1.ClusterNetworkPolicyIngressRule {
	return npv1beta1.ClusterNetworkPolicyIngressRule{Action: npv1beta1.ClusterNetworkPolicyRuleAction(action),
		From: []npv1beta1.ClusterNetworkPolicyIngressPeer{peer}, Protocols: protos}
}

func nsPeer(s string) npv1beta1.ClusterNetworkPolicyIngressPeer {
	return npv1beta1.ClusterNetworkPolicyIngressPeer{Namespaces: sel(s)}
}

func podPeer(nsSel, podSel string) npv1beta1.ClusterNetworkPolicyIngressPeer {
	return npv1beta1.ClusterNetworkPolicyIngressPeer{Pods: &npv1beta1.NamespacedPod{NamespaceSelector: *sel(nsSel), PodSelector: *sel(podSel)}}
}

func udpRange(start, end int32) npv1beta1.ClusterNetworkPolicyProtocol {
	return npv1beta1.ClusterNetworkPolicyProtocol{UDP: &npv1beta1.ClusterNetworkPolicyProtocolUDP{
		DestinationPort: &npv1beta1.Port{Range: &npv1beta1.PortRange{Start: start, End: end}}}}
}

func TestPolicyAdminOrderAndFailClosed(t *testing.T) {
	in := fixture()
	b := cnp("b", npv1beta1.AdminTier, 10, "")
	b.Spec.Ingress = []npv1beta1.ClusterNetworkPolicyIngressRule{cnpIn("Accept", nsPeer("team=y"), npv1beta1.ClusterNetworkPolicyProtocol{DestinationNamedPort: "http"})}
	a := cnp("a", npv1beta1.AdminTier, 10, "team=x")
	a.Spec.Ingress = []npv1beta1.ClusterNetworkPolicyIngressRule{
		cnpIn("Deny", podPeer("", "app=client"), udpRange(1, 100)),
		cnpIn("Pass", npv1beta1.ClusterNetworkPolicyIngressPeer{}), // unknown peer: deny all
		cnpIn("Accept", nsPeer(""), npv1beta1.ClusterNetworkPolicyProtocol{
			TCP: &npv1beta1.ClusterNetworkPolicyProtocolTCP{}, UDP: &npv1beta1.ClusterNetworkPolicyProtocolUDP{}}), // two protocols in one: dropped
	}
	a.Spec.Egress = []npv1beta1.ClusterNetworkPolicyEgressRule{
		// domainNames are a peer this version cannot honour: the Accept
		// rule matches nothing, the Deny rule denies all.
		{Action: "Accept", To: []npv1beta1.ClusterNetworkPolicyEgressPeer{{DomainNames: []npv1beta1.DomainName{"example.com"}}, {Networks: []npv1beta1.CIDR{"198.51.100.0/24"}}}},
		{Action: "Deny", To: []npv1beta1.ClusterNetworkPolicyEgressPeer{{Networks: []npv1beta1.CIDR{"203.0.113.0/24"}}, {DomainNames: []npv1beta1.DomainName{"example.org"}}}},
	}
	c := cnp("c", npv1beta1.AdminTier, 5, "kubernetes.io/metadata.name=none")
	odd := cnp("odd", "Middle", 1, "")
	in.ClusterPolicies = []npv1beta1.ClusterNetworkPolicy{b, a, c, odd}
	n, err := Policy(in)
	checkErr(t, err, "spec.egress[0].to[0].domainNames: domainNames are not supported (rule dropped)")
	checkErr(t, err, "spec.egress[1].to[1].domainNames: domainNames are not supported (rule denies all)")
	checkErr(t, err, `clusternetworkpolicy odd: spec.tier: tier "Middle" is not Admin or Baseline (policy skipped)`)
	checkErr(t, err, "clusternetworkpolicy a: spec.ingress[1].from[0]: no field this version knows is set (rule denies all)")
	checkErr(t, err, "spec.ingress[2].protocols[0]: tcp, udp are all set (one only) (rule dropped)")
	web := dirs{
		in: policy.Direction{Admin: []policy.AdminRule{
			{Action: policy.Deny, Rule: policy.Rule{ID: "cnp/a/ingress/0", Peers: hosts("10.0.1.1", "10.0.2.1"), Ports: []policy.Port{{Protocol: policy.UDP, From: 1, To: 100}}}},
			{Action: policy.Deny, Rule: policy.Rule{ID: "cnp/a/ingress/1", Peers: policy.Peers{Any: true}}},
			{Action: policy.Allow, Rule: policy.Rule{ID: "cnp/b/ingress/0", Peers: hosts("10.0.1.1"), Ports: []policy.Port{tcp(8080)}}},
		}},
		out: policy.Direction{Admin: []policy.AdminRule{
			{Action: policy.Deny, Rule: policy.Rule{ID: "cnp/a/egress/1", Peers: policy.Peers{Any: true}}},
		}},
	}
	db := web
	db.in.Admin = append(web.in.Admin[:2:2], policy.AdminRule{Action: policy.Allow, Rule: policy.Rule{ID: "cnp/b/ingress/0", Peers: hosts("10.0.1.1"), Ports: []policy.Port{tcp(9090)}}})
	checkNode(t, n, []string{"v-db", "v-web"}, map[string]dirs{"v-web": web, "v-db": db})
}

// TestPolicyProtocols reads each form of a rule's protocols.
func TestPolicyProtocols(t *testing.T) {
	port := func(n int32) *npv1beta1.Port { return &npv1beta1.Port{Number: n} }
	for _, tc := range []struct {
		what  string
		proto npv1beta1.ClusterNetworkPolicyProtocol
		want  []policy.Port
		err   string
	}{
		{"tcp, every port", npv1beta1.ClusterNetworkPolicyProtocol{TCP: &npv1beta1.ClusterNetworkPolicyProtocolTCP{}}, []policy.Port{{Protocol: policy.TCP}}, ""},
		{"udp 53", npv1beta1.ClusterNetworkPolicyProtocol{UDP: &npv1beta1.ClusterNetworkPolicyProtocolUDP{DestinationPort: port(53)}}, []policy.Port{{Protocol: policy.UDP, From: 53}}, ""},
		{"sctp range", npv1beta1.ClusterNetworkPolicyProtocol{SCTP: &npv1beta1.ClusterNetworkPolicyProtocolSCTP{DestinationPort: &npv1beta1.Port{Range: &npv1beta1.PortRange{Start: 10, End: 20}}}}, []policy.Port{{Protocol: policy.SCTP, From: 10, To: 20}}, ""},
		{"bad number", npv1beta1.ClusterNetworkPolicyProtocol{TCP: &npv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: port(70000)}}, nil, "protocols[0].tcp.destinationPort: number: port 70000 is not in 1-65535"},
		{"reversed range", npv1beta1.ClusterNetworkPolicyProtocol{UDP: &npv1beta1.ClusterNetworkPolicyProtocolUDP{DestinationPort: &npv1beta1.Port{Range: &npv1beta1.PortRange{Start: 20, End: 10}}}}, nil, "protocols[0].udp.destinationPort: range: port range 20-10"},
		{"number and range", npv1beta1.ClusterNetworkPolicyProtocol{TCP: &npv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &npv1beta1.Port{Number: 1, Range: &npv1beta1.PortRange{Start: 1, End: 2}}}}, nil, "protocols[0].tcp.destinationPort: both number and range are set"},
		{"nothing", npv1beta1.ClusterNetworkPolicyProtocol{}, nil, "protocols[0]: no field this version knows is set"},
	} {
		ps, probs := adminProtocols("spec.ingress[0]", []npv1beta1.ClusterNetworkPolicyProtocol{tc.proto})
		if tc.err != "" {
			if len(probs) != 1 || probs[0].String() != "spec.ingress[0]."+tc.err {
				t.Errorf("%s: problems %v, want spec.ingress[0].%s", tc.what, probs, tc.err)
			}
			continue
		}
		if len(probs) > 0 {
			t.Errorf("%s: %v", tc.what, probs)
			continue
		}
		if len(ps.numbered) != len(tc.want) || (len(tc.want) > 0 && ps.numbered[0] != tc.want[0]) {
			t.Errorf("%s: ports %v, want %v", tc.what, ps.numbered, tc.want)
		}
	}
	if ps, probs := adminProtocols("spec.ingress[0]", nil); len(probs) > 0 || !ps.all {
		t.Errorf("no protocols: %+v, %v; want every port", ps, probs)
	}
}

// TestPolicyTiersDecide feeds the translation to Decide: an admin Pass
// falls to the NetworkPolicy tier, the baseline tier (two policies in
// priority order, one with Pass) only decides for pods no NetworkPolicy
// isolates, named ports resolve per pod.
func TestPolicyTiersDecide(t *testing.T) {
	in := fixture()
	guard := cnp("guard", npv1beta1.AdminTier, 1, "team=x")
	guard.Spec.Ingress = []npv1beta1.ClusterNetworkPolicyIngressRule{
		cnpIn("Pass", nsPeer("team=y")),
		cnpIn("Deny", podPeer("team=x", "app=client")),
	}
	in.NetworkPolicies = []networkingv1.NetworkPolicy{withIngress(netpolicy("a", "web", "app=web"), networkingv1.NetworkPolicyIngressRule{
		From: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team=y")}), Ports: []networkingv1.NetworkPolicyPort{npPort("", "http")}})}
	// The baseline of priority 1 passes b/client's port 9999 on (to
	// "admitted"); the one of priority 2 denies every pod.
	first := cnp("first", npv1beta1.BaselineTier, 1, "")
	first.Spec.Ingress = []npv1beta1.ClusterNetworkPolicyIngressRule{cnpIn("Pass", nsPeer("team=y"),
		npv1beta1.ClusterNetworkPolicyProtocol{TCP: &npv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: &npv1beta1.Port{Number: 9999}}})}
	second := cnp("second", npv1beta1.BaselineTier, 2, "")
	second.Spec.Ingress = []npv1beta1.ClusterNetworkPolicyIngressRule{cnpIn("Deny", nsPeer(""))}
	in.ClusterPolicies = []npv1beta1.ClusterNetworkPolicy{second, guard, first}
	n, err := Policy(in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policy.Compile(n); err != nil {
		t.Fatalf("compile: %v", err)
	}
	pkt := func(peer string, port uint16) policy.Packet {
		return policy.Packet{Peer: netip.MustParseAddr(peer), Protocol: uint8(policy.TCP), Port: port}
	}
	for _, tc := range []struct {
		veth, what string
		p          policy.Packet
		want       bool
	}{
		{"v-web", "b/client passed to the NetworkPolicy, to web's http", pkt("10.0.1.1", 8080), true},
		{"v-web", "b/client passed to the NetworkPolicy, another port", pkt("10.0.1.1", 9090), false},
		{"v-web", "c/client denied by the admin tier", pkt("10.0.2.1", 8080), false},
		{"v-web", "an outside address: no admin rule, isolated", pkt("203.0.113.1", 8080), false},
		{"v-db", "b/client passed, db not isolated: the baseline denies", pkt("10.0.1.1", 9090), false},
		{"v-db", "b/client to 9999: the first baseline passes, admitted", pkt("10.0.1.1", 9999), true},
		{"v-db", "a/web, not isolated: the baseline denies pods", pkt("10.0.0.1", 9090), false},
		{"v-db", "an outside address: no tier decides, admitted", pkt("203.0.113.1", 9090), true},
		{"v-db", "c/client denied by the admin tier", pkt("10.0.2.1", 9090), false},
	} {
		e, ok := endpoint(n, tc.veth)
		if !ok {
			t.Fatalf("no endpoint %s", tc.veth)
		}
		if got := e.Ingress.Decide(tc.p); got != tc.want {
			t.Errorf("%s ingress, %s: admitted %v, want %v", tc.veth, tc.what, got, tc.want)
		}
	}
}
