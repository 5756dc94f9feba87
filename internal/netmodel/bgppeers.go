package netmodel

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// BGPSessionStates are the session states a node's daemon publishes in
// estuaryv1.AnnotationBGPPeers.
var BGPSessionStates = []string{"Idle", "Connect", "Active", "OpenSent", "OpenConfirm", estuaryv1.BGPStateEstablished, "Unknown"}

// ParseBGPPeers reads the value of a Node's estuaryv1.AnnotationBGPPeers:
// a JSON object mapping each BGP network's name to its peers. Every peer
// must have an IP address (no zone), an AS number of 1 to 4294967295 and a
// known session state; the error names the network, the peer and the
// field. Any node can write its own annotation, so nothing else is
// believed.
func ParseBGPPeers(v string) (map[string][]estuaryv1.NodeBGPPeer, error) {
	var out map[string][]estuaryv1.NodeBGPPeer
	if err := json.Unmarshal([]byte(v), &out); err != nil {
		return nil, err
	}
	if out == nil {
		return nil, fmt.Errorf("not a JSON object of networks")
	}
	for name, peers := range out {
		if name == "" {
			return nil, fmt.Errorf("a network without a name")
		}
		for i, p := range peers {
			if err := checkBGPPeer(p); err != nil {
				return nil, fmt.Errorf("network %q: peer %d: %w", name, i, err)
			}
		}
	}
	return out, nil
}

func checkBGPPeer(p estuaryv1.NodeBGPPeer) error {
	if ip, err := netip.ParseAddr(p.Address); err != nil || ip.Zone() != "" {
		return fmt.Errorf("address %q is not an IP address", p.Address)
	}
	if p.ASN < 1 || p.ASN > 1<<32-1 {
		return fmt.Errorf("asn %d is not an AS number (1 to 4294967295)", p.ASN)
	}
	if !slices.Contains(BGPSessionStates, p.State) {
		return fmt.Errorf("state %q is not a BGP session state (%v)", p.State, BGPSessionStates)
	}
	return nil
}
