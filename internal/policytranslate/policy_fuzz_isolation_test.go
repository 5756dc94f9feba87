package policytranslate

import (
	"reflect"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

// FuzzPolicyIsolation: one arbitrary NetworkPolicy and one arbitrary
// ClusterNetworkPolicy (any CIDR text, mapped and malformed included;
// selectors with arbitrary keys, values and operators; any ports,
// endPorts, protocols, actions, tiers), both confined to namespace z,
// beside a fixed set of good objects: the node's policy always compiles
// without a problem, and the good objects' endpoints (v-web, v-db) get
// exactly the chains and sets they get without the arbitrary objects.
func FuzzPolicyIsolation(f *testing.F) {
	f.Add([]byte{1, 1, 2, 0, 1, 0, 0, 1, 1, 0}, "::/0", "::ffff:0:0/96")
	f.Add([]byte{3, 2, 1, 7, 200, 9, 4, 4, 4, 1, 2, 3}, "::ffff:10.0.0.0/104", "::ffff:10.1.0.0/112")
	f.Add([]byte{255, 0, 17, 3, 3, 3, 80, 0, 1}, "10.0.0.0/33", "bogus")
	f.Add([]byte{9, 9, 9, 9, 9, 9, 9, 9}, "::ffff:10.0.0.0/80", "0.0.0.0/0")
	f.Fuzz(func(t *testing.T, data []byte, cidr, except string) {
		good := isolationInput()
		want := goodChains(t, good)
		in := isolationInput()
		g := &byteGen{data: data, cidrs: []string{cidr, except}}
		in.NetworkPolicies = append(in.NetworkPolicies, g.netpol())
		in.ClusterPolicies = append(in.ClusterPolicies, g.clusterPolicy())
		if got := goodChains(t, in); !reflect.DeepEqual(got, want) {
			t.Fatalf("the good objects' chains changed\n got %+v\nwant %+v\nNetworkPolicy %+v\nClusterNetworkPolicy %+v",
				got, want, in.NetworkPolicies[len(in.NetworkPolicies)-1], in.ClusterPolicies[len(in.ClusterPolicies)-1])
		}
	})
}

// isolationInput is the fixture with namespace z and its local pod z/bad
// (v-z), and good objects selecting a's pods.
func isolationInput() PolicyInput {
	in := fixture()
	in.Namespaces = append(in.Namespaces, ns("z", "kubernetes.io/metadata.name=z"))
	in.Pods = append(in.Pods, pod("z", "bad", "app=web", []string{"10.0.9.1"}, cport("http", "TCP", 8080)))
	in.Endpoints = append(in.Endpoints, PolicyEndpoint{HostVeth: "v-z", Addrs: addrs("10.0.9.1"), Namespace: "z", Name: "bad"})
	np := withIngress(netpolicy("a", "web", "app=web"),
		networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team=y")}),
			Ports: []networkingv1.NetworkPolicyPort{npPort("", "http")}},
		networkingv1.NetworkPolicyIngressRule{From: from(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "::ffff:10.0.0.0/104", Except: []string{"10.0.1.0/24"}}})})
	np.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{To: from(networkingv1.NetworkPolicyPeer{PodSelector: sel("app=db")}),
		Ports: []networkingv1.NetworkPolicyPort{npPort("", "http")}}}
	np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
	guard := cnp("guard", npv1beta1.AdminTier, 1, "team=x")
	guard.Spec.Ingress = []npv1beta1.ClusterNetworkPolicyIngressRule{cnpIn("Pass", nsPeer("team=y")), cnpIn("Deny", podPeer("team=x", "app=client"))}
	base := cnp("base", npv1beta1.BaselineTier, 1, "team=x")
	base.Spec.Egress = []npv1beta1.ClusterNetworkPolicyEgressRule{{Action: "Deny",
		To: []npv1beta1.ClusterNetworkPolicyEgressPeer{{Networks: []npv1beta1.CIDR{"192.0.2.0/24"}}}}}
	in.NetworkPolicies = []networkingv1.NetworkPolicy{np}
	in.ClusterPolicies = []npv1beta1.ClusterNetworkPolicy{guard, base}
	return in
}

// goodChains compiles in and returns what v-web and v-db get: their map
// entries, chains and the sets those chains name. It fails t when
// translation reports a problem of a good object or Compile one at all.
func goodChains(t *testing.T, in PolicyInput) policy.Ruleset {
	t.Helper()
	n, err := Policy(in)
	for _, e := range ObjectErrors(err) {
		if e.Namespace != "z" && e.Name != "z" {
			t.Fatalf("a good object has problems: %v", e)
		}
	}
	rs, err := policy.Compile(n)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	out := policy.Ruleset{Ingress: map[string]string{}, Egress: map[string]string{}}
	sets := map[string]bool{}
	for _, c := range rs.Chains {
		if strings.Contains(c.Name, "v-z") {
			continue
		}
		out.Chains = append(out.Chains, c)
		for _, r := range c.Rules {
			sets[r.Set] = true
		}
	}
	for _, s := range rs.Sets {
		if sets[s.Name] {
			out.Sets = append(out.Sets, s)
		}
	}
	for _, v := range []string{"v-web", "v-db"} {
		if c, ok := rs.Ingress[v]; ok {
			out.Ingress[v] = c
		}
		if c, ok := rs.Egress[v]; ok {
			out.Egress[v] = c
		}
	}
	return out
}

// byteGen draws arbitrary policy fields from data; cidrs are the CIDR
// texts the fuzzer varies freely, used besides generated ones.
type byteGen struct {
	data  []byte
	cidrs []string
}

func (g *byteGen) next() byte {
	if len(g.data) == 0 {
		return 0
	}
	b := g.data[0]
	g.data = g.data[1:]
	return b
}

// str is an arbitrary string of up to 15 bytes, or one of a few words.
func (g *byteGen) str() string {
	words := []string{"", "app", "web", "kubernetes.io/metadata.name", "z", "a", "team", "-bad-", "x y"}
	n := int(g.next())
	if n < 128 {
		return words[n%len(words)]
	}
	n %= 16
	n = min(n, len(g.data))
	s := string(g.data[:n])
	g.data = g.data[n:]
	return s
}

func (g *byteGen) cidr() string {
	switch g.next() % 5 {
	case 0, 1:
		return g.cidrs[int(g.next())%len(g.cidrs)]
	case 2:
		return "::ffff:" + []string{"10.0.0.0", "0.0.0.0", "10.0.9.1", "192.0.2.0"}[g.next()%4] + "/" + itoa(int(g.next())%140)
	case 3:
		return []string{"10.0.9.0", "fd00::", "::", "0.0.0.0"}[g.next()%4] + "/" + itoa(int(g.next())%140)
	}
	return g.str()
}

func itoa(n int) string { return strconv.Itoa(n) }

func (g *byteGen) selector() *metav1.LabelSelector {
	s := &metav1.LabelSelector{}
	for range int(g.next() % 3) {
		if g.next()%2 == 0 {
			if s.MatchLabels == nil {
				s.MatchLabels = map[string]string{}
			}
			s.MatchLabels[g.str()] = g.str()
			continue
		}
		ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist}
		op := metav1.LabelSelectorOperator(g.str())
		if b := g.next(); b < 200 {
			op = ops[int(b)%len(ops)]
		}
		var vals []string
		for range int(g.next() % 3) {
			vals = append(vals, g.str())
		}
		s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{Key: g.str(), Operator: op, Values: vals})
	}
	return s
}

// inZ is a selector of namespace z alone, narrowed further by arbitrary
// requirements.
func (g *byteGen) inZ() metav1.LabelSelector {
	s := g.selector()
	s.MatchLabels = map[string]string{"kubernetes.io/metadata.name": "z"}
	return *s
}

func (g *byteGen) npPeers() []networkingv1.NetworkPolicyPeer {
	var out []networkingv1.NetworkPolicyPeer
	for range int(g.next() % 3) {
		var p networkingv1.NetworkPolicyPeer
		b := g.next()
		if b&1 != 0 {
			p.PodSelector = g.selector()
		}
		if b&2 != 0 {
			p.NamespaceSelector = g.selector()
		}
		if b&4 != 0 || b == 0 {
			p.IPBlock = &networkingv1.IPBlock{CIDR: g.cidr()}
			for range int(g.next() % 3) {
				p.IPBlock.Except = append(p.IPBlock.Except, g.cidr())
			}
		}
		out = append(out, p)
	}
	return out
}

func (g *byteGen) npPorts() []networkingv1.NetworkPolicyPort {
	var out []networkingv1.NetworkPolicyPort
	for range int(g.next() % 3) {
		var p networkingv1.NetworkPolicyPort
		if b := g.next(); b%4 != 0 {
			pr := corev1.Protocol([]string{"TCP", "UDP", "SCTP", "ICMP", g.str()}[int(b)%5])
			p.Protocol = &pr
		}
		switch g.next() % 4 {
		case 1:
			v := intstr.FromInt32(int32(g.next())*300 - 100)
			p.Port = &v
		case 2:
			v := intstr.FromString(g.str())
			p.Port = &v
		}
		if g.next()%2 == 0 {
			e := int32(g.next())*300 - 50
			p.EndPort = &e
		}
		out = append(out, p)
	}
	return out
}

// netpol is an arbitrary NetworkPolicy of namespace z.
func (g *byteGen) netpol() networkingv1.NetworkPolicy {
	np := netpolicy("z", "arbitrary", "")
	np.Spec.PodSelector = *g.selector()
	for range int(g.next() % 3) {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyType([]string{"Ingress", "Egress", g.str()}[g.next()%3]))
	}
	for range int(g.next() % 4) {
		if g.next()%2 == 0 {
			np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: g.npPeers(), Ports: g.npPorts()})
		} else {
			np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: g.npPeers(), Ports: g.npPorts()})
		}
	}
	return np
}

// clusterPolicy is an arbitrary ClusterNetworkPolicy whose subject is in
// namespace z.
func (g *byteGen) clusterPolicy() npv1beta1.ClusterNetworkPolicy {
	tiers := []npv1beta1.Tier{npv1beta1.AdminTier, npv1beta1.BaselineTier, npv1beta1.Tier(g.str())}
	c := cnp("z", tiers[int(g.next())%3], int32(g.next()%4), "")
	c.Spec.Subject = npv1beta1.ClusterNetworkPolicySubject{Pods: &npv1beta1.NamespacedPod{NamespaceSelector: g.inZ(), PodSelector: *g.selector()}}
	for range int(g.next() % 4) {
		action := npv1beta1.ClusterNetworkPolicyRuleAction([]string{"Accept", "Deny", "Pass", g.str()}[g.next()%4])
		var to []npv1beta1.ClusterNetworkPolicyEgressPeer
		for range int(g.next() % 3) {
			switch g.next() % 6 {
			case 0:
				to = append(to, npv1beta1.ClusterNetworkPolicyEgressPeer{Namespaces: g.selector()})
			case 1:
				to = append(to, npv1beta1.ClusterNetworkPolicyEgressPeer{Pods: &npv1beta1.NamespacedPod{NamespaceSelector: *g.selector(), PodSelector: *g.selector()}})
			case 2:
				to = append(to, npv1beta1.ClusterNetworkPolicyEgressPeer{Networks: []npv1beta1.CIDR{npv1beta1.CIDR(g.cidr()), npv1beta1.CIDR(g.cidr())}})
			case 3:
				to = append(to, npv1beta1.ClusterNetworkPolicyEgressPeer{Nodes: g.selector()})
			case 4:
				to = append(to, npv1beta1.ClusterNetworkPolicyEgressPeer{DomainNames: []npv1beta1.DomainName{npv1beta1.DomainName(g.str())}})
			default:
				to = append(to, npv1beta1.ClusterNetworkPolicyEgressPeer{})
			}
		}
		var protos []npv1beta1.ClusterNetworkPolicyProtocol
		for range int(g.next() % 3) {
			dest := &npv1beta1.Port{Number: int32(g.next())*300 - 100}
			if g.next()%2 == 0 {
				dest = &npv1beta1.Port{Range: &npv1beta1.PortRange{Start: int32(g.next()) * 200, End: int32(g.next()) * 200}}
			}
			var p npv1beta1.ClusterNetworkPolicyProtocol
			switch g.next() % 5 {
			case 0:
				p.TCP = &npv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: dest}
			case 1:
				p.UDP = &npv1beta1.ClusterNetworkPolicyProtocolUDP{DestinationPort: dest}
			case 2:
				p.SCTP = &npv1beta1.ClusterNetworkPolicyProtocolSCTP{DestinationPort: dest}
			case 3:
				p.DestinationNamedPort = g.str()
			}
			protos = append(protos, p)
		}
		if g.next()%2 == 0 {
			from := make([]npv1beta1.ClusterNetworkPolicyIngressPeer, len(to))
			for j, p := range to {
				from[j] = npv1beta1.ClusterNetworkPolicyIngressPeer{Namespaces: p.Namespaces, Pods: p.Pods}
			}
			c.Spec.Ingress = append(c.Spec.Ingress, npv1beta1.ClusterNetworkPolicyIngressRule{Action: action, From: from, Protocols: protos})
		} else {
			c.Spec.Egress = append(c.Spec.Egress, npv1beta1.ClusterNetworkPolicyEgressRule{Action: action, To: to, Protocols: protos})
		}
	}
	return c
}
