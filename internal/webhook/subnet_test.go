package webhook

import (
	"testing"

	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func TestValidateSubnet(t *testing.T) {
	vlan, bgp := estuaryv1.NetworkModeVLAN, estuaryv1.NetworkModeBGP
	networks := []estuaryv1.Network{overlay("o"), overlay("o2"),
		underlay("v", vlan, map[string]string{"rack": "r1"}), underlay("b", bgp, map[string]string{"bgp": "on"})}
	withNetID := subnet("x", "o", "10.9.0.0/24")
	withNetID.Spec.NetID = ptr.To[int64](7)
	vlanNetID := subnet("x", "v", "10.9.0.0/24,,,10.9.0.1")
	vlanNetID.Spec.NetID = ptr.To[int64](7)
	badVersion := subnet("x", "o", "10.9.0.0/24")
	badVersion.Spec.Range.Version = 6
	cases := []struct {
		name     string
		sub      estuaryv1.Subnet
		existing []estuaryv1.Subnet
		want     []string
	}{
		{"first subnet", subnet("x", "o", "10.0.0.0/24"), nil, nil},
		{"re-checked against itself", subnet("x", "o", "10.0.0.0/24"), []estuaryv1.Subnet{subnet("x", "o", "10.0.0.0/24")}, nil},
		{"missing network", subnet("x", "nope", "10.0.0.0/24"), nil, []string{`subnet "x"`, "spec.network", `network "nope"`}},
		{"adjacent CIDRs", subnet("x", "o", "10.0.1.0/24"), []estuaryv1.Subnet{subnet("a", "o", "10.0.0.0/24")}, nil},
		{"inside another", subnet("b", "o", "10.0.0.0/24"), []estuaryv1.Subnet{subnet("a", "o2", "10.0.0.0/16")},
			[]string{`subnet "b": spec.range.cidr 10.0.0.0/24 overlaps subnet "a" (10.0.0.0/16)`, `network "o2"`}},
		{"around another in one network", subnet("b", "o", "10.0.0.0/16"), []estuaryv1.Subnet{subnet("a", "o", "10.0.5.0/24")},
			[]string{`subnet "b"`, "spec.range.cidr", `subnet "a"`, "identical cidr"}},
		{"same CIDR, other network", subnet("b", "o", "10.0.0.0/24,10.0.0.1,10.0.0.9"), []estuaryv1.Subnet{subnet("a", "o2", "10.0.0.0/24,10.0.0.10,10.0.0.20")},
			[]string{`subnet "b"`, "spec.range.cidr", `subnet "a"`}},
		{"same CIDR, same network, disjoint ranges", subnet("b", "o", "10.0.0.0/24,10.0.0.100,10.0.0.200"),
			[]estuaryv1.Subnet{subnet("a", "o", "10.0.0.0/24,10.0.0.2,10.0.0.99,10.0.0.1")}, nil},
		{"same CIDR, same network, shared gateway", subnet("b", "v", "10.0.0.0/24,10.0.0.100,10.0.0.200,10.0.0.1"),
			[]estuaryv1.Subnet{subnet("a", "v", "10.0.0.0/24,10.0.0.2,10.0.0.99,10.0.0.1")}, nil},
		{"same CIDR, same network, ranges meet", subnet("b", "o", "10.0.0.0/24,10.0.0.99,10.0.0.200"),
			[]estuaryv1.Subnet{subnet("a", "o", "10.0.0.0/24,10.0.0.2,10.0.0.99")},
			[]string{`subnet "b"`, "spec.range start-end 10.0.0.99-10.0.0.200", `subnet "a"'s range 10.0.0.2-10.0.0.99`}},
		{"same CIDR, same network, default ranges", subnet("b", "o", "10.0.0.0/24"), []estuaryv1.Subnet{subnet("a", "o", "10.0.0.0/24")},
			[]string{"spec.range start-end 10.0.0.1-10.0.0.254", `subnet "a"'s range 10.0.0.1-10.0.0.254`}},
		{"range holds the other's gateway", subnet("b", "o", "10.0.0.0/24,10.0.0.100,10.0.0.200"),
			[]estuaryv1.Subnet{subnet("a", "o", "10.0.0.0/24,10.0.0.2,10.0.0.99,10.0.0.150")},
			[]string{`subnet "b"`, "spec.range start-end", `subnet "a"'s gateway 10.0.0.150`}},
		{"gateway inside the other's range", subnet("b", "o", "10.0.0.0/24,10.0.0.100,10.0.0.200,10.0.0.50"),
			[]estuaryv1.Subnet{subnet("a", "o", "10.0.0.0/24,10.0.0.2,10.0.0.99")},
			[]string{`subnet "b"`, "spec.range.gateway 10.0.0.50", `subnet "a"'s range`}},
		{"IPv6 overlap", subnet("b", "o", "fd00::/96"), []estuaryv1.Subnet{subnet("a", "o2", "fd00::/64")},
			[]string{`subnet "b": spec.range.cidr fd00::/96 overlaps subnet "a" (fd00::/64)`}},
		{"IPv6 default range ends at the last address", subnet("b", "o", "fd00::/120"), []estuaryv1.Subnet{subnet("a", "o", "fd00::/120,fd00::ff,fd00::ff")},
			[]string{"fd00::1-fd00::ff"}},
		{"families never overlap", subnet("b", "o", "fd00::/64"), []estuaryv1.Subnet{subnet("a", "o", "10.0.0.0/8")}, nil},
		{"VLAN subnet without gateway", subnet("x", "v", "10.1.0.0/24"), nil, []string{`subnet "x"`, "spec.range.gateway", `network "v"`, "VLAN"}},
		{"VLAN subnet with gateway", subnet("x", "v", "10.1.0.0/24,,,10.1.0.1"), nil, nil},
		{"BGP subnet without gateway", subnet("x", "b", "10.1.0.0/24"), nil, nil},
		{"netID on an overlay subnet", withNetID, nil, []string{`subnet "x"`, "spec.netID 7", `network "o"`, "VXLAN"}},
		{"netID on a VLAN subnet", vlanNetID, nil, nil},
		{"version does not match CIDR", badVersion, nil, []string{`subnet "x"`, "spec.range.version 6", "IPv4"}},
		{"CIDR not canonical", subnet("x", "o", "10.0.0.1/24"), nil, []string{`subnet "x"`, "spec.range.cidr"}},
		{"start outside CIDR", subnet("x", "o", "10.0.0.0/24,10.0.1.1"), nil, []string{`subnet "x"`, "spec.range.start"}},
		{"malformed other subnet is skipped", subnet("b", "o", "10.0.0.0/24"), []estuaryv1.Subnet{subnet("a", "o", "bogus")}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := ValidateSubnet(&c.sub, networks, c.existing)
			if c.want == nil {
				requireAdmitted(t, err)
				return
			}
			requireDenied(t, err, c.want...)
		})
	}
}

func TestValidateSubnetDelete(t *testing.T) {
	s := subnet("s", "o", "10.0.0.0/24")
	requireAdmitted(t, ValidateSubnetDelete(&s, []estuaryv1.IPInstance{instance("ns", "i", "other")}))
	instances := []estuaryv1.IPInstance{instance("ns", "b", "s"), instance("ns", "a", "s")}
	requireDenied(t, ValidateSubnetDelete(&s, instances), `subnet "s"`, `ipinstance "a" (pod ns/p-a`, "spec.subnet", "1 more")
}
