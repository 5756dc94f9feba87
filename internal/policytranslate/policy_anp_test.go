package policytranslate

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

func anpPorts(ps ...npv1alpha1.AdminNetworkPolicyPort) *[]npv1alpha1.AdminNetworkPolicyPort {
	return &ps
}

func anp(name string, prio int32, subjectNS string) npv1alpha1.AdminNetworkPolicy {
	return npv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: npv1alpha1.AdminNetworkPolicySpec{
		Priority: prio, Subject: npv1alpha1.AdminNetworkPolicySubject{Namespaces: sel(subjectNS)}}}
}

// TestFromAdminNetworkPolicy converts each field of an AdminNetworkPolicy
// as docs/networkpolicy.md's table says.
func TestFromAdminNetworkPolicy(t *testing.T) {
	a := anp("legacy", 7, "team=x")
	pods := &npv1alpha1.NamespacedPod{NamespaceSelector: *sel("team=y"), PodSelector: *sel("app=client")}
	a.Spec.Ingress = []npv1alpha1.AdminNetworkPolicyIngressRule{{Name: "in", Action: "Allow",
		From: []npv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: sel("team=y")}, {Pods: pods}},
		Ports: anpPorts(
			npv1alpha1.AdminNetworkPolicyPort{PortNumber: &npv1alpha1.Port{Protocol: corev1.ProtocolTCP, Port: 80}},
			npv1alpha1.AdminNetworkPolicyPort{PortRange: &npv1alpha1.PortRange{Protocol: corev1.ProtocolUDP, Start: 1000, End: 2000}},
			npv1alpha1.AdminNetworkPolicyPort{NamedPort: ptr.To("http")},
			npv1alpha1.AdminNetworkPolicyPort{PortRange: &npv1alpha1.PortRange{Protocol: corev1.ProtocolSCTP, Start: 9, End: 9}},
		)}}
	a.Spec.Egress = []npv1alpha1.AdminNetworkPolicyEgressRule{
		{Action: "Deny", To: []npv1alpha1.AdminNetworkPolicyEgressPeer{{Nodes: sel("role=db")}, {Networks: []npv1alpha1.CIDR{"10.9.0.0/16"}},
			{DomainNames: []npv1alpha1.DomainName{"example.com"}}}},
		{Action: "Pass", To: []npv1alpha1.AdminNetworkPolicyEgressPeer{{Pods: pods}}},
	}
	got, probs := FromAdminNetworkPolicy(&a)
	if len(probs) != 0 {
		t.Errorf("problems %v, want none", probs)
	}
	port := func(n int32) *npv1beta1.Port { return &npv1beta1.Port{Number: n} }
	want := npv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "anp:legacy"}, Spec: npv1beta1.ClusterNetworkPolicySpec{
		Tier: npv1beta1.AdminTier, Priority: 7, Subject: npv1beta1.ClusterNetworkPolicySubject{Namespaces: sel("team=x")},
		Ingress: []npv1beta1.ClusterNetworkPolicyIngressRule{{Name: "in", Action: "Accept",
			From: []npv1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: sel("team=y")},
				{Pods: &npv1beta1.NamespacedPod{NamespaceSelector: *sel("team=y"), PodSelector: *sel("app=client")}}},
			Protocols: []npv1beta1.ClusterNetworkPolicyProtocol{
				{TCP: &npv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: port(80)}},
				{UDP: &npv1beta1.ClusterNetworkPolicyProtocolUDP{DestinationPort: &npv1beta1.Port{Range: &npv1beta1.PortRange{Start: 1000, End: 2000}}}},
				{DestinationNamedPort: "http"},
				{SCTP: &npv1beta1.ClusterNetworkPolicyProtocolSCTP{DestinationPort: port(9)}},
			}}},
		Egress: []npv1beta1.ClusterNetworkPolicyEgressRule{
			{Action: "Deny", To: []npv1beta1.ClusterNetworkPolicyEgressPeer{{Nodes: sel("role=db")}, {Networks: []npv1beta1.CIDR{"10.9.0.0/16"}},
				{DomainNames: []npv1beta1.DomainName{"example.com"}}}},
			{Action: "Pass", To: []npv1beta1.ClusterNetworkPolicyEgressPeer{
				{Pods: &npv1beta1.NamespacedPod{NamespaceSelector: *sel("team=y"), PodSelector: *sel("app=client")}}}},
		}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("converted\n got %+v\nwant %+v", got, want)
	}
}

// TestFromBaselineAdminNetworkPolicy: tier Baseline at the highest
// priority, Allow as Accept, ports nil as every port.
func TestFromBaselineAdminNetworkPolicy(t *testing.T) {
	b := npv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: npv1alpha1.BaselineAdminNetworkPolicySpec{
		Subject: npv1alpha1.AdminNetworkPolicySubject{Namespaces: sel("")},
		Ingress: []npv1alpha1.BaselineAdminNetworkPolicyIngressRule{{Action: "Deny", From: []npv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: sel("")}}}},
		Egress: []npv1alpha1.BaselineAdminNetworkPolicyEgressRule{{Action: "Allow",
			To: []npv1alpha1.BaselineAdminNetworkPolicyEgressPeer{{Networks: []npv1alpha1.CIDR{"0.0.0.0/0"}}}}},
	}}
	got, probs := FromBaselineAdminNetworkPolicy(&b)
	if len(probs) != 0 {
		t.Errorf("problems %v, want none", probs)
	}
	want := npv1beta1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "banp:default"}, Spec: npv1beta1.ClusterNetworkPolicySpec{
		Tier: npv1beta1.BaselineTier, Priority: 1000, Subject: npv1beta1.ClusterNetworkPolicySubject{Namespaces: sel("")},
		Ingress: []npv1beta1.ClusterNetworkPolicyIngressRule{{Action: "Deny", From: []npv1beta1.ClusterNetworkPolicyIngressPeer{{Namespaces: sel("")}}}},
		Egress: []npv1beta1.ClusterNetworkPolicyEgressRule{{Action: "Accept",
			To: []npv1beta1.ClusterNetworkPolicyEgressPeer{{Networks: []npv1beta1.CIDR{"0.0.0.0/0"}}}}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("converted\n got %+v\nwant %+v", got, want)
	}
}

// TestANPBadPortFailsClosed: a port that cannot be converted is a problem
// named by its v1alpha1 field, and its Deny rule denies all.
func TestANPBadPortFailsClosed(t *testing.T) {
	a := anp("bad", 1, "team=x")
	a.Spec.Ingress = []npv1alpha1.AdminNetworkPolicyIngressRule{{Action: "Deny",
		From:  []npv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: sel("team=y")}},
		Ports: anpPorts(npv1alpha1.AdminNetworkPolicyPort{PortNumber: &npv1alpha1.Port{Protocol: "ICMP", Port: 1}})}}
	probs := AdminNetworkPolicyProblems(&a)
	if len(probs) != 1 || probs[0].Field != "spec.ingress[0].ports[0]" || !strings.Contains(probs[0].Message, `protocol "ICMP"`) {
		t.Fatalf("problems %v, want one for spec.ingress[0].ports[0] naming protocol ICMP", probs)
	}
	in := fixture()
	in.AdminNetworkPolicies = []npv1alpha1.AdminNetworkPolicy{a}
	n, err := Policy(in)
	checkErr(t, err, `adminnetworkpolicy bad: spec.ingress[0].ports[0]: protocol "ICMP" is not TCP, UDP or SCTP`)
	deny := policy.Direction{Admin: []policy.AdminRule{{Action: policy.Deny, Rule: policy.Rule{ID: "cnp/anp:bad/ingress/0", Peers: policy.Peers{Any: true}}}}}
	checkNode(t, n, []string{"v-db", "v-web"}, map[string]dirs{"v-web": {in: deny}, "v-db": {in: deny}})
}

// TestPolicyANPOrder: at equal priority a ClusterNetworkPolicy's rules
// come before an AdminNetworkPolicy's whatever their names, a lower
// priority before both, and the BaselineAdminNetworkPolicy after every
// Baseline-tier ClusterNetworkPolicy.
func TestPolicyANPOrder(t *testing.T) {
	in := fixture()
	rule := func(action string) []npv1alpha1.AdminNetworkPolicyIngressRule {
		return []npv1alpha1.AdminNetworkPolicyIngressRule{{Action: npv1alpha1.AdminNetworkPolicyRuleAction(action),
			From: []npv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: sel("team=y")}}}}
	}
	early, same := anp("a", 3, "team=x"), anp("a", 10, "team=x")
	early.Name = "early"
	early.Spec.Ingress, same.Spec.Ingress = rule("Pass"), rule("Deny")
	z := cnp("z", npv1beta1.AdminTier, 10, "team=x")
	z.Spec.Ingress = []npv1beta1.ClusterNetworkPolicyIngressRule{cnpIn("Accept", nsPeer("team=y"))}
	base := cnp("base", npv1beta1.BaselineTier, 1000, "team=x")
	base.Spec.Ingress = []npv1beta1.ClusterNetworkPolicyIngressRule{cnpIn("Deny", nsPeer("team=y"))}
	in.ClusterPolicies = []npv1beta1.ClusterNetworkPolicy{z, base}
	in.AdminNetworkPolicies = []npv1alpha1.AdminNetworkPolicy{same, early}
	in.BaselineAdminNetworkPolicies = []npv1alpha1.BaselineAdminNetworkPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: npv1alpha1.BaselineAdminNetworkPolicySpec{Subject: npv1alpha1.AdminNetworkPolicySubject{Namespaces: sel("team=x")},
			Ingress: []npv1alpha1.BaselineAdminNetworkPolicyIngressRule{{Action: "Allow",
				From: []npv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: sel("team=y")}}}}}}}
	n, err := Policy(in)
	checkErr(t, err, "")
	peers := hosts("10.0.1.1")
	want := policy.Direction{
		Admin: []policy.AdminRule{
			{Action: policy.Pass, Rule: policy.Rule{ID: "cnp/anp:early/ingress/0", Peers: peers}},
			{Action: policy.Allow, Rule: policy.Rule{ID: "cnp/z/ingress/0", Peers: peers}},
			{Action: policy.Deny, Rule: policy.Rule{ID: "cnp/anp:a/ingress/0", Peers: peers}},
		},
		Baseline: []policy.AdminRule{
			{Action: policy.Deny, Rule: policy.Rule{ID: "cnp/base/ingress/0", Peers: peers}},
			{Action: policy.Allow, Rule: policy.Rule{ID: "cnp/banp:default/ingress/0", Peers: peers}},
		},
	}
	checkNode(t, n, []string{"v-db", "v-web"}, map[string]dirs{"v-web": {in: want}, "v-db": {in: want}})
}
