package policytranslate

import (
	"net/netip"
	"reflect"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

// TestPolicyUnmapsPrefixes: an IPv4-mapped prefix of an ipBlock or a
// network is its IPv4 prefix, a mapped except under an IPv6 cidr excludes
// nothing of it, a prefix shorter than /96 stays IPv6; none is a problem
// and every result compiles.
func TestPolicyUnmapsPrefixes(t *testing.T) {
	block := func(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
		return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
	}
	pfx := netip.MustParsePrefix
	in := fixture()
	in.NetworkPolicies = []networkingv1.NetworkPolicy{withEgress(netpolicy("a", "p", "app=web"),
		networkingv1.NetworkPolicyEgressRule{To: from(block("::/0", "::ffff:0:0/96"))},
		networkingv1.NetworkPolicyEgressRule{To: from(block("::ffff:10.0.0.0/104", "::ffff:10.1.0.0/112"))},
		networkingv1.NetworkPolicyEgressRule{To: from(block("::ffff:10.0.0.0/80"))},
	)}
	c := cnp("c", npv1beta1.AdminTier, 1, "")
	c.Spec.Egress = []npv1beta1.ClusterNetworkPolicyEgressRule{{Action: "Deny",
		To: []npv1beta1.ClusterNetworkPolicyEgressPeer{{Networks: []npv1beta1.CIDR{"::ffff:192.0.2.0/120"}}}}}
	in.ClusterPolicies = []npv1beta1.ClusterNetworkPolicy{c}
	n, err := Policy(in)
	if err != nil {
		t.Fatalf("unmapping is not a problem: %v", err)
	}
	rs, err := policy.Compile(n)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	if len(rs.Chains) == 0 {
		t.Fatal("no chain")
	}
	web, _ := endpoint(n, "v-web")
	want := []policy.Rule{
		{ID: "np/a/p/egress/0", Peers: policy.Peers{Blocks: []policy.Block{{CIDR: pfx("::/0"), Except: []netip.Prefix{pfx("0.0.0.0/0")}}}}},
		{ID: "np/a/p/egress/1", Peers: policy.Peers{Blocks: []policy.Block{{CIDR: pfx("10.0.0.0/8"), Except: []netip.Prefix{pfx("10.1.0.0/16")}}}}},
		{ID: "np/a/p/egress/2", Peers: policy.Peers{Blocks: []policy.Block{{CIDR: pfx("::/80")}}}},
	}
	if !reflect.DeepEqual(web.Egress.Allow, want) {
		t.Errorf("egress\n got %+v\nwant %+v", web.Egress.Allow, want)
	}
	deny := policy.Peers{Blocks: []policy.Block{{CIDR: pfx("192.0.2.0/24")}}}
	if len(web.Egress.Admin) != 1 || !reflect.DeepEqual(web.Egress.Admin[0].Peers, deny) {
		t.Errorf("admin egress %+v, want a Deny of %+v", web.Egress.Admin, deny)
	}
	for _, tc := range []struct {
		peer policy.Packet
		want bool
	}{
		{policy.Packet{Peer: netip.MustParseAddr("2001:db8::1"), Protocol: 6, Port: 1}, true},
		{policy.Packet{Peer: netip.MustParseAddr("10.2.0.1"), Protocol: 6, Port: 1}, true},
		{policy.Packet{Peer: netip.MustParseAddr("10.1.0.1"), Protocol: 6, Port: 1}, false},
		{policy.Packet{Peer: netip.MustParseAddr("192.0.2.1"), Protocol: 6, Port: 1}, false},
		{policy.Packet{Peer: netip.MustParseAddr("198.51.100.1"), Protocol: 6, Port: 1}, false},
	} {
		if got := web.Egress.Decide(tc.peer); got != tc.want {
			t.Errorf("egress to %v: admitted %v, want %v", tc.peer.Peer, got, tc.want)
		}
	}
}

// TestProblemsAreWhatPolicyReports: for objects with problems of every
// kind, the problems Policy reports for each object are exactly what
// NetworkPolicyProblems and ClusterPolicyProblems list, with their field
// paths; a good object has none; a pod-dependent miss (a named port no
// pod has) is not a problem.
func TestProblemsAreWhatPolicyReports(t *testing.T) {
	bad := netpolicy("a", "bad", "")
	bad.Spec.PolicyTypes = []networkingv1.PolicyType{"Ingress", "Sideways"}
	bad.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{
		{From: from(networkingv1.NetworkPolicyPeer{PodSelector: sel("app=client")},
			networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16", "bogus"}}})},
		{Ports: []networkingv1.NetworkPolicyPort{npPort("ICMP", 1), npPort("", "nowhere")}},
		{Ports: []networkingv1.NetworkPolicyPort{npPort("", "nowhere")}},
	}
	unreadable := netpolicy("a", "unreadable", "")
	unreadable.Spec.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}
	good := withIngress(netpolicy("a", "good", "app=web"), networkingv1.NetworkPolicyIngressRule{
		From: from(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "::ffff:10.0.0.0/104"}})})
	c := cnp("c", npv1beta1.AdminTier, 1, "")
	c.Spec.Egress = []npv1beta1.ClusterNetworkPolicyEgressRule{
		{Action: "Pass", To: []npv1beta1.ClusterNetworkPolicyEgressPeer{{DomainNames: []npv1beta1.DomainName{"example.com"}}}},
		{Action: "Accept", To: []npv1beta1.ClusterNetworkPolicyEgressPeer{{Networks: []npv1beta1.CIDR{"10.0.0.0/8", "10.0.0.0/40"}}}},
	}
	in := fixture()
	in.NetworkPolicies = []networkingv1.NetworkPolicy{bad, unreadable, good}
	in.ClusterPolicies = []npv1beta1.ClusterNetworkPolicy{c}
	_, err := Policy(in)
	got := map[objRef][]Problem{}
	for _, e := range ObjectErrors(err) {
		got[objRef{e.Kind, e.Namespace, e.Name}] = e.Problems
	}
	want := map[objRef][]Problem{
		{KindNetworkPolicy, "a", "bad"}: {
			{"spec.policyTypes[1]", `unknown type "Sideways" (ignored)`},
			{"spec.ingress[0].from[1].ipBlock.except[1]", `netip.ParsePrefix("bogus"): no '/' (rule dropped)`},
			{"spec.ingress[1].ports[0].protocol", `protocol "ICMP" is not TCP, UDP or SCTP (rule dropped)`},
		},
		{KindNetworkPolicy, "a", "unreadable"}: {
			{"spec.podSelector", `label selector: "Bogus" is not a valid label selector operator (policy skipped: nobody knows whom it selects)`},
		},
		{KindClusterNetworkPolicy, "", "c"}: {
			{"spec.egress[0].to[0].domainNames", "domainNames are not supported (rule denies all)"},
			{"spec.egress[1].to[0].networks[1]", `netip.ParsePrefix("10.0.0.0/40"): prefix length out of range (rule dropped)`},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Policy reports\n%+v\nwant\n%+v", got, want)
	}
	for _, np := range in.NetworkPolicies {
		if ps := NetworkPolicyProblems(&np); !reflect.DeepEqual(ps, want[objRef{KindNetworkPolicy, np.Namespace, np.Name}]) {
			t.Errorf("NetworkPolicyProblems(%s) = %+v, want what Policy reports", np.Name, ps)
		}
	}
	if ps := ClusterPolicyProblems(&c); !reflect.DeepEqual(ps, want[objRef{KindClusterNetworkPolicy, "", "c"}]) {
		t.Errorf("ClusterPolicyProblems(c) = %+v, want what Policy reports", ps)
	}
}
