package policytranslate

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

// FuzzClusterPolicy translates ClusterNetworkPolicies built from
// arbitrary bytes (tiers and actions known and unknown, every peer kind
// and none, protocols with numbers, ranges, names, several fields or
// none, CIDRs well- and ill-formed) over the fixture: the result always
// validates and compiles, is the same twice, and the baseline tier holds
// only Allow and Deny.
func FuzzClusterPolicy(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{3, 1, 1, 2, 0, 200, 3, 17, 255, 4, 2, 7, 7, 7, 9, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fixture()
		in.ClusterPolicies = fuzzClusterPolicies(data)
		n := translateChecked(t, in)
		for _, e := range n.Endpoints {
			for _, r := range append(e.Ingress.Baseline, e.Egress.Baseline...) {
				if r.Action != policy.Allow && r.Action != policy.Deny {
					t.Fatalf("%s: baseline rule %s has action %v", e.HostVeth, r.ID, r.Action)
				}
			}
		}
	})
}

func fuzzClusterPolicies(data []byte) []npv1beta1.ClusterNetworkPolicy {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	tiers := []npv1beta1.Tier{npv1beta1.AdminTier, npv1beta1.BaselineTier, "Other"}
	actions := []string{"Accept", "Deny", "Pass", "Allow"}
	selectors := []string{"", "team=x", "team=y", "app=client", "app=web"}
	cidrs := []npv1beta1.CIDR{"10.0.0.0/16", "fd00::/64", "bogus", "10.0.1.1/32", "::ffff:10.0.0.0/104", "::ffff:0:0/96", "::/0"}
	names := []string{"http", "dns", "none"}
	pick := func() *metav1.LabelSelector { return sel(selectors[int(next())%len(selectors)]) }
	protocols := func() []npv1beta1.ClusterNetworkPolicyProtocol {
		var out []npv1beta1.ClusterNetworkPolicyProtocol
		for range int(next() % 3) {
			var dest *npv1beta1.Port
			switch next() % 4 {
			case 1:
				dest = &npv1beta1.Port{Number: int32(next()) * 300}
			case 2:
				dest = &npv1beta1.Port{Range: &npv1beta1.PortRange{Start: int32(next()) + 1, End: int32(next()) * 200}}
			case 3:
				dest = &npv1beta1.Port{Number: 80, Range: &npv1beta1.PortRange{Start: 1, End: 2}}
			}
			var p npv1beta1.ClusterNetworkPolicyProtocol
			switch b := next(); b % 6 {
			case 0:
				p.TCP = &npv1beta1.ClusterNetworkPolicyProtocolTCP{DestinationPort: dest}
			case 1:
				p.UDP = &npv1beta1.ClusterNetworkPolicyProtocolUDP{DestinationPort: dest}
			case 2:
				p.SCTP = &npv1beta1.ClusterNetworkPolicyProtocolSCTP{DestinationPort: dest}
			case 3:
				p.DestinationNamedPort = names[int(b/6)%3]
			case 4:
				p.TCP, p.UDP = &npv1beta1.ClusterNetworkPolicyProtocolTCP{}, &npv1beta1.ClusterNetworkPolicyProtocolUDP{}
			}
			out = append(out, p)
		}
		return out
	}
	var out []npv1beta1.ClusterNetworkPolicy
	for i := range int(next()%4) + 1 {
		c := cnp(string(rune('p'+i)), tiers[int(next())%3], int32(next()%4), "")
		if next()%2 == 0 {
			c.Spec.Subject = npv1beta1.ClusterNetworkPolicySubject{Namespaces: pick()}
		} else {
			c.Spec.Subject = npv1beta1.ClusterNetworkPolicySubject{Pods: &npv1beta1.NamespacedPod{NamespaceSelector: *pick(), PodSelector: *pick()}}
		}
		for range int(next() % 4) {
			action := npv1beta1.ClusterNetworkPolicyRuleAction(actions[int(next())%4])
			var to []npv1beta1.ClusterNetworkPolicyEgressPeer
			for range int(next()%2) + 1 {
				switch next() % 6 {
				case 0:
					to = append(to, npv1beta1.ClusterNetworkPolicyEgressPeer{Namespaces: pick()})
				case 1:
					to = append(to, npv1beta1.ClusterNetworkPolicyEgressPeer{Pods: &npv1beta1.NamespacedPod{NamespaceSelector: *pick(), PodSelector: *pick()}})
				case 2:
					to = append(to, npv1beta1.ClusterNetworkPolicyEgressPeer{Networks: []npv1beta1.CIDR{cidrs[int(next())%len(cidrs)]}})
				case 3:
					to = append(to, npv1beta1.ClusterNetworkPolicyEgressPeer{Nodes: pick()})
				case 4:
					to = append(to, npv1beta1.ClusterNetworkPolicyEgressPeer{DomainNames: []npv1beta1.DomainName{"example.com"}})
				default:
					to = append(to, npv1beta1.ClusterNetworkPolicyEgressPeer{})
				}
			}
			if next()%2 == 0 {
				from := make([]npv1beta1.ClusterNetworkPolicyIngressPeer, len(to))
				for j, p := range to {
					from[j] = npv1beta1.ClusterNetworkPolicyIngressPeer{Namespaces: p.Namespaces, Pods: p.Pods}
				}
				c.Spec.Ingress = append(c.Spec.Ingress, npv1beta1.ClusterNetworkPolicyIngressRule{Action: action, From: from, Protocols: protocols()})
			} else {
				c.Spec.Egress = append(c.Spec.Egress, npv1beta1.ClusterNetworkPolicyEgressRule{Action: action, To: to, Protocols: protocols()})
			}
		}
		out = append(out, c)
	}
	return out
}
