package bgp

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/estuary-cni/estuary/internal/bgpstatus"
)

func TestNetworksCollector(t *testing.T) {
	c := NewNetworksCollector(func(context.Context) (map[string][]bgpstatus.PeerStatus, error) {
		return map[string][]bgpstatus.PeerStatus{"fabric": {
			{Address: netip.MustParseAddr("10.0.0.1"), ASN: 65000, State: bgpstatus.StateEstablished, Advertised: 3},
			{Address: netip.MustParseAddr("10.0.0.2"), ASN: 65000, State: bgpstatus.StateActive},
		}}, nil
	})
	want := `# HELP estuary_bgp_advertised_prefixes Prefixes the node's BGP speaker has sent the peer (its Adj-RIB-Out): 0 while the session is down.
# TYPE estuary_bgp_advertised_prefixes gauge
estuary_bgp_advertised_prefixes{network="fabric",peer="10.0.0.1"} 3
estuary_bgp_advertised_prefixes{network="fabric",peer="10.0.0.2"} 0
# HELP estuary_bgp_peer_up Whether the node's BGP session with the peer is Established (1) or not (0).
# TYPE estuary_bgp_peer_up gauge
estuary_bgp_peer_up{network="fabric",peer="10.0.0.1"} 1
estuary_bgp_peer_up{network="fabric",peer="10.0.0.2"} 0
# HELP estuary_bgp_peer_state The session state of each BGP peer of each BGP network of the node: 1 for the current state, 0 for the others.
# TYPE estuary_bgp_peer_state gauge
estuary_bgp_peer_state{network="fabric",peer="10.0.0.1",state="Active"} 0
estuary_bgp_peer_state{network="fabric",peer="10.0.0.1",state="Connect"} 0
estuary_bgp_peer_state{network="fabric",peer="10.0.0.1",state="Established"} 1
estuary_bgp_peer_state{network="fabric",peer="10.0.0.1",state="Idle"} 0
estuary_bgp_peer_state{network="fabric",peer="10.0.0.1",state="OpenConfirm"} 0
estuary_bgp_peer_state{network="fabric",peer="10.0.0.1",state="OpenSent"} 0
estuary_bgp_peer_state{network="fabric",peer="10.0.0.1",state="Unknown"} 0
estuary_bgp_peer_state{network="fabric",peer="10.0.0.2",state="Active"} 1
estuary_bgp_peer_state{network="fabric",peer="10.0.0.2",state="Connect"} 0
estuary_bgp_peer_state{network="fabric",peer="10.0.0.2",state="Established"} 0
estuary_bgp_peer_state{network="fabric",peer="10.0.0.2",state="Idle"} 0
estuary_bgp_peer_state{network="fabric",peer="10.0.0.2",state="OpenConfirm"} 0
estuary_bgp_peer_state{network="fabric",peer="10.0.0.2",state="OpenSent"} 0
estuary_bgp_peer_state{network="fabric",peer="10.0.0.2",state="Unknown"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
	failing := NewNetworksCollector(func(context.Context) (map[string][]bgpstatus.PeerStatus, error) {
		return nil, errors.New("network other: list bgp peers: timeout")
	})
	if err := testutil.CollectAndCompare(failing, strings.NewReader("")); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("a failing speaker is not reported: %v", err)
	}
}
