package translate

import (
	"net/netip"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

func anp(name string, prio int32, subjectNS string) anpv1alpha1.AdminNetworkPolicy {
	return anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: anpv1alpha1.AdminNetworkPolicySpec{
		Priority: prio, Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: sel(subjectNS)}}}
}

func anpIn(action string, peer anpv1alpha1.AdminNetworkPolicyIngressPeer, ports ...anpv1alpha1.AdminNetworkPolicyPort) anpv1alpha1.AdminNetworkPolicyIngressRule {
	r := anpv1alpha1.AdminNetworkPolicyIngressRule{Action: anpv1alpha1.AdminNetworkPolicyRuleAction(action), From: []anpv1alpha1.AdminNetworkPolicyIngressPeer{peer}}
	if len(ports) > 0 {
		r.Ports = &ports
	}
	return r
}

func nsPeer(s string) anpv1alpha1.AdminNetworkPolicyIngressPeer {
	return anpv1alpha1.AdminNetworkPolicyIngressPeer{Namespaces: sel(s)}
}

func TestPolicyAdminOrderAndFailClosed(t *testing.T) {
	in := fixture()
	named := "http"
	b := anp("b", 10, "")
	b.Spec.Ingress = []anpv1alpha1.AdminNetworkPolicyIngressRule{anpIn("Allow", nsPeer("team=y"), anpv1alpha1.AdminNetworkPolicyPort{NamedPort: &named})}
	a := anp("a", 10, "team=x")
	a.Spec.Ingress = []anpv1alpha1.AdminNetworkPolicyIngressRule{
		anpIn("Deny", anpv1alpha1.AdminNetworkPolicyIngressPeer{Pods: &anpv1alpha1.NamespacedPod{NamespaceSelector: *sel(""), PodSelector: *sel("app=client")}},
			anpv1alpha1.AdminNetworkPolicyPort{PortRange: &anpv1alpha1.PortRange{Protocol: "UDP", Start: 1, End: 100}}),
		anpIn("Pass", anpv1alpha1.AdminNetworkPolicyIngressPeer{}), // unknown peer: deny all
	}
	a.Spec.Egress = []anpv1alpha1.AdminNetworkPolicyEgressRule{
		{Action: "Allow", To: []anpv1alpha1.AdminNetworkPolicyEgressPeer{{DomainNames: []anpv1alpha1.DomainName{"example.com"}}, {Networks: []anpv1alpha1.CIDR{"198.51.100.0/24"}}}},
	}
	c := anp("c", 5, "kubernetes.io/metadata.name=none")
	in.AdminPolicies = []anpv1alpha1.AdminNetworkPolicy{b, a, c}
	in.BaselinePolicies = []anpv1alpha1.BaselineAdminNetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "other"}}}
	n, err := Policy(in)
	checkErr(t, err, "domainNames are not supported")
	checkErr(t, err, "baselineadminnetworkpolicy other: only the one named default")
	checkErr(t, err, "anp/a/ingress/1: peer 0: no field this version knows is set (denies all)")
	web := dirs{
		in: policy.Direction{Admin: []policy.AdminRule{
			{Action: policy.Deny, Rule: policy.Rule{ID: "anp/a/ingress/0", Peers: hosts("10.0.1.1", "10.0.2.1"), Ports: []policy.Port{{Protocol: policy.UDP, From: 1, To: 100}}}},
			{Action: policy.Deny, Rule: policy.Rule{ID: "anp/a/ingress/1", Peers: policy.Peers{Any: true}}},
			{Action: policy.Allow, Rule: policy.Rule{ID: "anp/b/ingress/0", Peers: hosts("10.0.1.1"), Ports: []policy.Port{tcp(8080)}}},
		}},
		out: policy.Direction{Admin: []policy.AdminRule{
			{Action: policy.Allow, Rule: policy.Rule{ID: "anp/a/egress/0", Peers: policy.Peers{Blocks: []policy.Block{{CIDR: netip.MustParsePrefix("198.51.100.0/24")}}}}},
		}},
	}
	db := web
	db.in.Admin = append(web.in.Admin[:2:2], policy.AdminRule{Action: policy.Allow, Rule: policy.Rule{ID: "anp/b/ingress/0", Peers: hosts("10.0.1.1"), Ports: []policy.Port{tcp(9090)}}})
	checkNode(t, n, []string{"v-db", "v-web"}, map[string]dirs{"v-web": web, "v-db": db})
}

// TestPolicyTiersDecide feeds the translation to Decide: ANP Pass falls to
// the NetworkPolicy tier, the baseline only decides for pods no
// NetworkPolicy isolates, named ports resolve per pod.
func TestPolicyTiersDecide(t *testing.T) {
	in := fixture()
	guard := anp("guard", 1, "team=x")
	guard.Spec.Ingress = []anpv1alpha1.AdminNetworkPolicyIngressRule{
		anpIn("Pass", nsPeer("team=y")),
		anpIn("Deny", anpv1alpha1.AdminNetworkPolicyIngressPeer{Pods: &anpv1alpha1.NamespacedPod{NamespaceSelector: *sel("team=x"), PodSelector: *sel("app=client")}}),
	}
	in.AdminPolicies = []anpv1alpha1.AdminNetworkPolicy{guard}
	in.NetworkPolicies = []networkingv1.NetworkPolicy{withIngress(netpolicy("a", "web", "app=web"), networkingv1.NetworkPolicyIngressRule{
		From: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team=y")}), Ports: []networkingv1.NetworkPolicyPort{npPort("", "http")}})}
	in.BaselinePolicies = []anpv1alpha1.BaselineAdminNetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: anpv1alpha1.BaselineAdminNetworkPolicySpec{
		Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: sel("")},
		Ingress: []anpv1alpha1.BaselineAdminNetworkPolicyIngressRule{{Action: "Deny", From: []anpv1alpha1.AdminNetworkPolicyIngressPeer{nsPeer("")}}},
	}}}
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
