package policytranslate

import (
	"reflect"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

// FuzzPolicy translates NetworkPolicies built from arbitrary bytes
// (selectors over a few labels, with unknown operators; ports by number,
// range, name or nothing; CIDRs well- and ill-formed, IPv4-mapped, unmasked)
// over the fixture:
// the result always validates and compiles, is the same twice, and a
// pod no policy selects stays open.
func FuzzPolicy(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{9, 9, 1, 0, 200, 3, 17, 255, 4, 2, 7, 7, 7})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fixture()
		in.NetworkPolicies = fuzzPolicies(data)
		n := translateChecked(t, in)
		for _, e := range n.Endpoints {
			selected := false
			for _, np := range in.NetworkPolicies {
				s, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
				p := in.Pods[0]
				if e.HostVeth == "v-db" {
					p = in.Pods[1]
				}
				selected = selected || (err == nil && np.Namespace == p.Namespace && s.Matches(labelsOf(p.Labels)))
			}
			if !selected && (e.Ingress.Isolated || e.Egress.Isolated) {
				t.Fatalf("%s isolated by no policy", e.HostVeth)
			}
		}
	})
}

// translateChecked translates in and fails t unless the result validates,
// compiles and is the same twice.
func translateChecked(t *testing.T, in PolicyInput) policy.Node {
	t.Helper()
	n, _ := Policy(in)
	if err := n.Validate(); err != nil {
		t.Fatalf("invalid translation: %v", err)
	}
	if _, err := policy.Compile(n); err != nil {
		t.Fatalf("translation does not compile: %v", err)
	}
	again, _ := Policy(in)
	if !reflect.DeepEqual(n, again) {
		t.Fatal("two translations of one input differ")
	}
	return n
}

type labelsOf map[string]string

func (l labelsOf) Has(k string) bool   { _, ok := l[k]; return ok }
func (l labelsOf) Get(k string) string { return l[k] }
func (l labelsOf) Lookup(k string) (string, bool) {
	v, ok := l[k]
	return v, ok
}

func fuzzPolicies(data []byte) []networkingv1.NetworkPolicy {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	keys := []string{"app", "team", "role"}
	vals := []string{"web", "db", "client", "x", "y", ""}
	ops := []metav1.LabelSelectorOperator{metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist, "Bogus"}
	selector := func() *metav1.LabelSelector {
		s := &metav1.LabelSelector{}
		for range int(next() % 3) {
			b := next()
			if b%2 == 0 {
				s.MatchLabels = map[string]string{keys[int(b/2)%3]: vals[int(b/8)%6]}
			} else {
				s.MatchExpressions = append(s.MatchExpressions, metav1.LabelSelectorRequirement{Key: keys[int(b/2)%3], Operator: ops[int(b/8)%5], Values: []string{vals[int(b/64)%6]}})
			}
		}
		return s
	}
	cidrs := []string{"10.0.0.0/16", "10.0.0.2/32", "fd00::/64", "0.0.0.0/0", "bogus", "10.0.0.0/33",
		"::/0", "::ffff:0:0/96", "::ffff:10.0.0.0/104", "::ffff:10.0.0.0/80", "10.0.0.1/8", "::ffff:10.0.0.2/128", "fe80::1%eth0/64"}
	names := []string{"http", "dns", "none"}
	var out []networkingv1.NetworkPolicy
	for i := range int(next()%4) + 1 {
		np := netpolicy([]string{"a", "b"}[i%2], string(rune('p'+i)), "")
		np.Spec.PodSelector = *selector()
		for range int(next() % 3) {
			var peers []networkingv1.NetworkPolicyPeer
			for range int(next() % 3) {
				switch next() % 4 {
				case 0:
					peers = append(peers, networkingv1.NetworkPolicyPeer{PodSelector: selector()})
				case 1:
					peers = append(peers, networkingv1.NetworkPolicyPeer{NamespaceSelector: selector(), PodSelector: selector()})
				case 2:
					peers = append(peers, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidrs[int(next())%len(cidrs)], Except: []string{cidrs[int(next())%len(cidrs)]}}})
				default:
					peers = append(peers, networkingv1.NetworkPolicyPeer{})
				}
			}
			var ports []networkingv1.NetworkPolicyPort
			for range int(next() % 3) {
				b := next()
				switch b % 3 {
				case 0:
					ports = append(ports, npPort([]string{"", "UDP", "SCTP", "ICMP"}[b/4%4], int(next())*300))
				case 1:
					ports = append(ports, npPort("", int(next())+1, int32(next())*200))
				default:
					ports = append(ports, npPort([]string{"", "UDP"}[b/4%2], names[int(next())%3]))
				}
			}
			if next()%2 == 0 {
				np.Spec.Ingress = append(np.Spec.Ingress, networkingv1.NetworkPolicyIngressRule{From: peers, Ports: ports})
			} else {
				np.Spec.Egress = append(np.Spec.Egress, networkingv1.NetworkPolicyEgressRule{To: peers, Ports: ports})
			}
		}
		out = append(out, np)
	}
	return out
}
