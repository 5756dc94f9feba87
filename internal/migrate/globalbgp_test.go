package migrate

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// translateYAML translates hybridnet objects given as YAML.
func translateYAML(t *testing.T, doc string) Result {
	t.Helper()
	objs, err := ReadObjects("inline", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	networks, subnets, ipis, _ := Sort(objs)
	return Translate(Input{Networks: networks, Subnets: subnets, IPInstances: ipis, SecretNamespace: "kube-system"})
}

// hybridnet lets a pod start with every peer down when each allows it:
// estuary's network then waits for none. A GlobalBGP network with a
// nodeSelector (which hybridnet's webhook refuses) is not migrated, nor is
// an unknown mode of one.
func TestTranslateBGPWaitAndGlobalBGPRefusals(t *testing.T) {
	r := translateYAML(t, `
apiVersion: networking.alibaba.com/v1
kind: Network
metadata: {name: lax}
spec:
  type: Underlay
  mode: BGP
  netID: 65001
  nodeSelector: {network: lax}
  config:
    bgpPeers:
      - {asn: 65000, address: 10.1.0.1, allowNotEstablished: true}
      - {asn: 65000, address: 10.1.0.2, allowNotEstablished: true, doesNotRouteTraffic: true}
---
apiVersion: networking.alibaba.com/v1
kind: Network
metadata: {name: reflectors}
spec:
  type: Underlay
  mode: BGP
  netID: 65002
  nodeSelector: {network: reflectors}
  config:
    bgpPeers:
      - {asn: 65000, address: 10.2.0.1, doesNotRouteTraffic: true}
---
apiVersion: networking.alibaba.com/v1
kind: Network
metadata: {name: global-pinned}
spec: {type: GlobalBGP, nodeSelector: {rack: r1}}
---
apiVersion: networking.alibaba.com/v1
kind: Network
metadata: {name: global-odd}
spec: {type: GlobalBGP, mode: VXLAN}
`)
	lax := find(t, r.Networks, "lax")
	if !ptr.Equal(lax.Spec.BGPWaitForPeer, ptr.To(false)) || lax.Spec.BGPPeers[0].RequireEstablished || lax.Spec.BGPPeers[1].RequireEstablished ||
		lax.Spec.BGPPeers[0].DoesNotRouteTraffic || !lax.Spec.BGPPeers[1].DoesNotRouteTraffic {
		t.Errorf("lax: %+v; want bgpWaitForPeer false, no peer required, 10.1.0.2 not routing", lax.Spec)
	}
	rr := find(t, r.Networks, "reflectors")
	if rr.Spec.BGPPeers[0].DoesNotRouteTraffic || !rr.Spec.BGPPeers[0].RequireEstablished || rr.Spec.BGPWaitForPeer != nil {
		t.Errorf("reflectors: %+v; want the flag dropped (estuary needs a gateway), the peer required", rr.Spec)
	}
	for _, n := range r.Networks {
		if n.Spec.Type == estuaryv1.NetworkTypeGlobalBGP {
			t.Errorf("network %s migrated; want the refused GlobalBGP networks left out", n.Name)
		}
	}
	requireReported(t, r.Report.NotMigrated,
		"network reflectors: spec.config.bgpPeers[*].doesNotRouteTraffic: true on every peer",
		"network global-pinned: spec.nodeSelector: a GlobalBGP network spans every node",
		"network global-odd: spec.mode VXLAN: a GlobalBGP network's mode is GlobalBGP in hybridnet and unset in estuary")
}
