package webhook

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func TestValidateNetwork(t *testing.T) {
	vlan, bgp := estuaryv1.NetworkModeVLAN, estuaryv1.NetworkModeBGP
	nodes := []corev1.Node{
		node("n2", map[string]string{"rack": "r2", "zone": "z1"}),
		node("n1", map[string]string{"rack": "r1", "zone": "z1", "tier": "a"}),
	}
	noPeers := underlay("b", bgp, map[string]string{"bgp": "on"})
	noPeers.Spec.BGPPeers = nil
	cases := []struct {
		name     string
		net      estuaryv1.Network
		existing []estuaryv1.Network
		want     []string // nil: admitted
	}{
		{"first overlay", overlay("o"), nil, nil},
		{"overlay re-checked against itself", overlay("o"), []estuaryv1.Network{overlay("o")}, nil},
		{"second overlay", overlay("o2"), []estuaryv1.Network{overlay("o1")},
			[]string{`network "o2"`, "spec.type", `network "o1"`}},
		{"underlay beside overlay", underlay("u", vlan, map[string]string{"rack": "r1"}), []estuaryv1.Network{overlay("o")}, nil},
		{"disjoint domains", underlay("u2", vlan, map[string]string{"rack": "r2"}),
			[]estuaryv1.Network{underlay("u1", vlan, map[string]string{"rack": "r1"})}, nil},
		{"identical selectors, no node", underlay("u2", vlan, map[string]string{"rack": "r9"}),
			[]estuaryv1.Network{underlay("u1", bgp, map[string]string{"rack": "r9"})},
			[]string{`network "u2"`, "spec.nodeSelector", "{rack=r9}", `network "u1"`}},
		{"shared node", underlay("u2", vlan, map[string]string{"zone": "z1"}),
			[]estuaryv1.Network{underlay("u1", vlan, map[string]string{"rack": "r1"})},
			[]string{`network "u2"`, "spec.nodeSelector", `node "n1"`, `network "u1"`, "{rack=r1}"}},
		{"first shared node named by name order", underlay("u2", vlan, map[string]string{"zone": "z1"}),
			[]estuaryv1.Network{underlay("u1", vlan, map[string]string{"zone": "z1", "tier": "a"})},
			[]string{`node "n1"`}},
		{"superset selector without a node is allowed", underlay("u2", vlan, map[string]string{"rack": "r1", "tier": "b"}),
			[]estuaryv1.Network{underlay("u1", vlan, map[string]string{"rack": "r1"})}, nil},
		{"BGP without peers", noPeers, nil, []string{`network "b"`, "spec.bgpPeers"}},
		{"BGP with peers", underlay("b", bgp, map[string]string{"bgp": "on"}), nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateNetwork(&c.net, c.existing, nodes)
			if c.want == nil {
				requireAdmitted(t, err)
				return
			}
			requireDenied(t, err, c.want...)
		})
	}
}

func TestValidateNetworkReportsEveryConflict(t *testing.T) {
	sel := map[string]string{"rack": "r1"}
	n := underlay("u3", estuaryv1.NetworkModeVLAN, sel)
	existing := []estuaryv1.Network{underlay("u1", estuaryv1.NetworkModeVLAN, sel), underlay("u2", estuaryv1.NetworkModeBGP, sel)}
	requireDenied(t, ValidateNetwork(&n, existing, nil), `network "u1"`, `network "u2"`)
}

func TestValidateNetworkDelete(t *testing.T) {
	n := overlay("o")
	requireAdmitted(t, ValidateNetworkDelete(&n, []estuaryv1.Subnet{subnet("s", "other", "10.0.0.0/24")}))
	subnets := []estuaryv1.Subnet{subnet("s2", "o", "10.0.1.0/24"), subnet("s1", "o", "10.0.0.0/24")}
	requireDenied(t, ValidateNetworkDelete(&n, subnets), `network "o"`, `subnet "s1"`, "spec.network", "1 more")
}
