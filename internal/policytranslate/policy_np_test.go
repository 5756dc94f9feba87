package policytranslate

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

func withIngress(np networkingv1.NetworkPolicy, rules ...networkingv1.NetworkPolicyIngressRule) networkingv1.NetworkPolicy {
	np.Spec.Ingress = rules
	return np
}

func withEgress(np networkingv1.NetworkPolicy, rules ...networkingv1.NetworkPolicyEgressRule) networkingv1.NetworkPolicy {
	np.Spec.Egress = rules
	return np
}

func from(peers ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyPeer { return peers }

// dirs is an endpoint's expected ingress and egress.
type dirs struct{ in, out policy.Direction }

func TestPolicyNetworkPolicy(t *testing.T) {
	all := []string{"10.0.0.1", "fd00::1", "10.0.0.2", "10.0.1.1", "10.0.2.1"}
	bogus := netpolicy("a", "p", "")
	bogus.Spec.PodSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}
	egressOnly := netpolicy("a", "p", "app=web")
	egressOnly.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	cases := []struct {
		name    string
		nps     []networkingv1.NetworkPolicy
		want    map[string]dirs // by veth; absent: admits all
		wantErr string
	}{
		{name: "no policy admits everything"},
		{
			name: "empty podSelector selects every pod of its namespace, for ingress by default",
			nps:  []networkingv1.NetworkPolicy{withIngress(netpolicy("a", "all", ""), networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{PodSelector: sel("")})})},
			want: map[string]dirs{
				"v-web": {in: policy.Direction{Isolated: true, Allow: []policy.Rule{{ID: "np/a/all/ingress/0", Peers: hosts("10.0.0.1", "fd00::1", "10.0.0.2")}}}},
				"v-db":  {in: policy.Direction{Isolated: true, Allow: []policy.Rule{{ID: "np/a/all/ingress/0", Peers: hosts("10.0.0.1", "fd00::1", "10.0.0.2")}}}},
			},
		},
		{
			name: "a podSelector peer selects in the policy's namespace only",
			nps: []networkingv1.NetworkPolicy{withIngress(netpolicy("a", "p", "app=web"),
				networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{PodSelector: sel("app=client")})},
				networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{PodSelector: sel("app=db")})})},
			want: map[string]dirs{"v-web": {in: policy.Direction{Isolated: true, Allow: []policy.Rule{{ID: "np/a/p/ingress/1", Peers: hosts("10.0.0.2")}}}}},
		},
		{
			name: "namespaceSelector {} is every namespace, without host-network or finished pods",
			nps: []networkingv1.NetworkPolicy{withIngress(netpolicy("a", "p", "app=web"),
				networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("")})})},
			want: map[string]dirs{"v-web": {in: policy.Direction{Isolated: true, Allow: []policy.Rule{{ID: "np/a/p/ingress/0", Peers: hosts(all...)}}}}},
		},
		{
			name: "namespaceSelector and podSelector of one peer are ANDed, peers are ORed",
			nps: []networkingv1.NetworkPolicy{withIngress(netpolicy("a", "p", "app=web"),
				networkingv1.NetworkPolicyIngressRule{From: from(
					networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team=x"), PodSelector: sel("app=client")},
					networkingv1.NetworkPolicyPeer{PodSelector: sel("app=db")})})},
			want: map[string]dirs{"v-web": {in: policy.Direction{Isolated: true, Allow: []policy.Rule{{ID: "np/a/p/ingress/0", Peers: hosts("10.0.2.1", "10.0.0.2")}}}}},
		},
		{
			name: "egress rules make an Egress policy; ipBlock keeps its except",
			nps: []networkingv1.NetworkPolicy{withEgress(netpolicy("a", "p", "app=web"), networkingv1.NetworkPolicyEgressRule{
				To:    from(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24", Except: []string{"192.0.2.128/25"}}}),
				Ports: []networkingv1.NetworkPolicyPort{npPort("", 443)}})},
			want: map[string]dirs{"v-web": {in: policy.Direction{Isolated: true}, out: policy.Direction{Isolated: true, Allow: []policy.Rule{{
				ID: "np/a/p/egress/0", Ports: []policy.Port{tcp(443)},
				Peers: policy.Peers{Blocks: []policy.Block{{CIDR: netip.MustParsePrefix("192.0.2.0/24"), Except: []netip.Prefix{netip.MustParsePrefix("192.0.2.128/25")}}}},
			}}}}},
		},
		{
			name: "policyTypes Egress alone isolates egress and leaves ingress open",
			nps:  []networkingv1.NetworkPolicy{egressOnly},
			want: map[string]dirs{"v-web": {out: policy.Direction{Isolated: true}}},
		},
		{
			name: "ports: TCP by default, endPort, a protocol without a port",
			nps: []networkingv1.NetworkPolicy{withIngress(netpolicy("a", "p", "app=web"), networkingv1.NetworkPolicyIngressRule{
				Ports: []networkingv1.NetworkPolicyPort{npPort("", 80), npPort("UDP", 1000, 2000), npPort("SCTP", nil)}})},
			want: map[string]dirs{"v-web": {in: policy.Direction{Isolated: true, Allow: []policy.Rule{{ID: "np/a/p/ingress/0", Peers: policy.Peers{Any: true},
				Ports: []policy.Port{tcp(80), {Protocol: policy.UDP, From: 1000, To: 2000}, {Protocol: policy.SCTP}}}}}}},
		},
		{
			name: "an ingress named port is resolved against each local pod",
			nps: []networkingv1.NetworkPolicy{withIngress(netpolicy("a", "p", ""), networkingv1.NetworkPolicyIngressRule{
				Ports: []networkingv1.NetworkPolicyPort{npPort("", "http"), npPort("UDP", "dns"), npPort("UDP", "http")}})},
			want: map[string]dirs{
				"v-web": {in: policy.Direction{Isolated: true, Allow: []policy.Rule{{ID: "np/a/p/ingress/0", Peers: policy.Peers{Any: true},
					Ports: []policy.Port{tcp(8080), {Protocol: policy.UDP, From: 53}}}}}},
				"v-db": {in: policy.Direction{Isolated: true, Allow: []policy.Rule{{ID: "np/a/p/ingress/0", Peers: policy.Peers{Any: true},
					Ports: []policy.Port{tcp(9090)}}}}},
			},
		},
		{
			// web's dns is UDP: a TCP dns is not it.
			name: "a rule whose named port resolves nowhere is dropped, the isolation stays",
			nps: []networkingv1.NetworkPolicy{withIngress(netpolicy("a", "p", ""), networkingv1.NetworkPolicyIngressRule{
				Ports: []networkingv1.NetworkPolicyPort{npPort("TCP", "dns")}})},
			want: map[string]dirs{"v-db": {in: policy.Direction{Isolated: true}}, "v-web": {in: policy.Direction{Isolated: true}}},
		},
		{
			name: "an egress named port is resolved against each peer pod, one rule per number",
			nps: []networkingv1.NetworkPolicy{withEgress(netpolicy("a", "p", "app=web"), networkingv1.NetworkPolicyEgressRule{
				To:    from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("")}),
				Ports: []networkingv1.NetworkPolicyPort{npPort("", "http"), npPort("", 22)}})},
			want: map[string]dirs{"v-web": {in: policy.Direction{Isolated: true}, out: policy.Direction{Isolated: true, Allow: []policy.Rule{
				{ID: "np/a/p/egress/0", Peers: hosts(all...), Ports: []policy.Port{tcp(22)}},
				{ID: "np/a/p/egress/0/tcp-80", Peers: hosts("10.0.1.1"), Ports: []policy.Port{tcp(80)}},
				{ID: "np/a/p/egress/0/tcp-8080", Peers: hosts("10.0.0.1", "fd00::1"), Ports: []policy.Port{tcp(8080)}},
				{ID: "np/a/p/egress/0/tcp-9090", Peers: hosts("10.0.0.2"), Ports: []policy.Port{tcp(9090)}},
			}}}},
		},
		{
			name: "an egress named port to an ipBlock reaches the pods' addresses inside it",
			nps: []networkingv1.NetworkPolicy{withEgress(netpolicy("a", "p", "app=db"), networkingv1.NetworkPolicyEgressRule{
				To:    from(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.0.1.0/24"}}}),
				Ports: []networkingv1.NetworkPolicyPort{npPort("", "http")}})},
			want: map[string]dirs{"v-db": {in: policy.Direction{Isolated: true}, out: policy.Direction{Isolated: true, Allow: []policy.Rule{
				{ID: "np/a/p/egress/0/tcp-8080", Peers: hosts("10.0.0.1"), Ports: []policy.Port{tcp(8080)}},
				{ID: "np/a/p/egress/0/tcp-9090", Peers: hosts("10.0.0.2"), Ports: []policy.Port{tcp(9090)}},
			}}}},
		},
		{
			name: "an empty from is every peer; policies add up, each rule keeping its ID",
			nps: []networkingv1.NetworkPolicy{
				withIngress(netpolicy("a", "two", "app=web"), networkingv1.NetworkPolicyIngressRule{}),
				withIngress(netpolicy("a", "one", "app=web"), networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{PodSelector: sel("app=db")})}),
				withIngress(netpolicy("b", "other", ""), networkingv1.NetworkPolicyIngressRule{}),
			},
			want: map[string]dirs{"v-web": {in: policy.Direction{Isolated: true, Allow: []policy.Rule{
				{ID: "np/a/one/ingress/0", Peers: hosts("10.0.0.2")},
				{ID: "np/a/two/ingress/0", Peers: policy.Peers{Any: true}},
			}}}},
		},
		{
			name: "an unreadable rule is dropped and the policy still isolates",
			nps: []networkingv1.NetworkPolicy{withIngress(netpolicy("a", "p", "app=web"), networkingv1.NetworkPolicyIngressRule{
				From: from(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "bogus"}})})},
			want:    map[string]dirs{"v-web": {in: policy.Direction{Isolated: true}}},
			wantErr: "networkpolicy a/p: spec.ingress[0]",
		},
		{
			name:    "a policy whose podSelector cannot be read is skipped",
			nps:     []networkingv1.NetworkPolicy{bogus},
			wantErr: "networkpolicy a/p: spec.podSelector",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fixture()
			in.NetworkPolicies = tc.nps
			n, err := Policy(in)
			checkErr(t, err, tc.wantErr)
			checkNode(t, n, []string{"v-db", "v-web"}, tc.want)
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("error %v, want none", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("error %v, want one containing %q", err, want)
	}
}

// checkNode checks that n has exactly the endpoints veths, with the
// directions of want (zero for those want leaves out), and compiles.
func checkNode(t *testing.T, n policy.Node, veths []string, want map[string]dirs) {
	t.Helper()
	if len(n.Endpoints) != len(veths) {
		t.Fatalf("%d endpoints, want %d", len(n.Endpoints), len(veths))
	}
	for i, v := range veths {
		e := n.Endpoints[i]
		if e.HostVeth != v {
			t.Errorf("endpoint %d is %s, want %s", i, e.HostVeth, v)
		}
		w := want[v]
		if !reflect.DeepEqual(e.Ingress, w.in) {
			t.Errorf("%s ingress\n got %s\nwant %s", v, show(e.Ingress), show(w.in))
		}
		if !reflect.DeepEqual(e.Egress, w.out) {
			t.Errorf("%s egress\n got %s\nwant %s", v, show(e.Egress), show(w.out))
		}
	}
	if _, err := policy.Compile(n); err != nil {
		t.Errorf("the translation does not compile: %v", err)
	}
}

func show(d policy.Direction) string { return fmt.Sprintf("%+v", d) }

func TestPolicyEndpointOfUnknownPod(t *testing.T) {
	in := fixture()
	in.Endpoints = append(in.Endpoints, PolicyEndpoint{HostVeth: "v-new", Addrs: addrs("10.0.0.3"), Namespace: "a", Name: "new"})
	in.NetworkPolicies = []networkingv1.NetworkPolicy{netpolicy("a", "deny", "")}
	n, err := Policy(in)
	checkErr(t, err, "endpoint v-new: pod a/new is not known")
	checkNode(t, n, []string{"v-db", "v-web"}, map[string]dirs{
		"v-web": {in: policy.Direction{Isolated: true}},
		"v-db":  {in: policy.Direction{Isolated: true}},
	})
}
