package podipam

import (
	"testing"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// The GlobalBGP network has no domain: the manager gives its addresses to
// pods on any node, in or out of a BGP network's domain, whether they ask
// for it by name, by estuary's or hybridnet's network-type, or by subnet.
func TestGlobalBGPAllocatesOnAnyNode(t *testing.T) {
	overlay(t, "ov-gbgp", "10.64.0.0/24")
	newNetwork(t, "gbgp", estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeGlobalBGP}, map[string]estuaryv1.SubnetSpec{
		"gbgp-0": {Network: "gbgp", Range: estuaryv1.AddressRange{Version: 4, CIDR: "10.65.0.0/24"}},
	})
	underlay(t, "u-gbgp", map[string]string{"rack": "gbgp-r1"}, "10.66.0.0/24")
	newNode(t, "gbgp-in", map[string]string{"rack": "gbgp-r1"})
	newNode(t, "gbgp-out", map[string]string{"rack": "gbgp-r2"})
	startManager(t)
	ns := newNamespace(t, nil)
	cases := []struct {
		pod, node string
		opts      []podOpt
	}{
		{"by-name", "gbgp-in", []podOpt{annotated(estuaryv1.AnnotationNetwork, "gbgp")}},
		{"by-type", "gbgp-out", []podOpt{annotated(estuaryv1.AnnotationNetworkType, "GlobalBGP")}},
		{"by-hybridnet-type", "gbgp-out", []podOpt{annotated(netmodel.HybridnetNetworkType, "globalbgp")}},
		{"by-subnet", "gbgp-absent", []podOpt{annotated(estuaryv1.AnnotationSubnet, "gbgp-0")}},
	}
	for _, c := range cases {
		newPod(t, ns, c.pod, append(c.opts, onNode(c.node))...)
	}
	for _, c := range cases {
		ipi := waitInstances(t, ns, c.pod, 1, estuaryv1.IPInstanceBound)[0]
		if ipi.Spec.Network != "gbgp" || ipi.Spec.Subnet != "gbgp-0" || ipi.Spec.Binding.NodeName != c.node {
			t.Errorf("pod %s on %s: record %s in network %s subnet %s on node %s, want gbgp/gbgp-0 on %s",
				c.pod, c.node, ipi.Name, ipi.Spec.Network, ipi.Spec.Subnet, ipi.Spec.Binding.NodeName, c.node)
		}
	}
	waitUsed(t, "gbgp-0", int64(len(cases)))
}
