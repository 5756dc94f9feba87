package bgp

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/estuary-cni/estuary/internal/bgpstatus"
)

// The BGP metrics of the node, per BGP network and peer: what /bgp reports
// as JSON, for Prometheus.
var (
	peerStateDesc = prometheus.NewDesc("estuary_bgp_peer_state",
		"The session state of each BGP peer of each BGP network of the node: 1 for the current state, 0 for the others.",
		[]string{"network", "peer", "state"}, nil)
	peerUpDesc = prometheus.NewDesc("estuary_bgp_peer_up",
		"Whether the node's BGP session with the peer is Established (1) or not (0).",
		[]string{"network", "peer"}, nil)
	advertisedDesc = prometheus.NewDesc("estuary_bgp_advertised_prefixes",
		"Prefixes the node's BGP speaker has sent the peer (its Adj-RIB-Out): 0 while the session is down.",
		[]string{"network", "peer"}, nil)
)

// collectTimeout bounds how long a scrape waits for the speakers.
const collectTimeout = 5 * time.Second

// peerStates are the states peer_state reports, in FSM order.
var peerStates = []bgpstatus.SessionState{bgpstatus.StateIdle, bgpstatus.StateConnect, bgpstatus.StateActive, bgpstatus.StateOpenSent, bgpstatus.StateOpenConfirm,
	bgpstatus.StateEstablished, bgpstatus.StateUnknown}

// NetworksCollector exports the sessions of every speaker of the node, one
// per BGP network: estuary_bgp_peer_state, estuary_bgp_peer_up and
// estuary_bgp_advertised_prefixes. A node without a BGP network exports
// none of them.
type NetworksCollector struct {
	peers func(context.Context) (map[string][]bgpstatus.PeerStatus, error)
}

// NewNetworksCollector returns a collector of what peers reports: per BGP
// network, the status of its speaker's peers (datapath.BGPPart.BGPPeers).
func NewNetworksCollector(peers func(context.Context) (map[string][]bgpstatus.PeerStatus, error)) *NetworksCollector {
	return &NetworksCollector{peers: peers}
}

// Describe implements prometheus.Collector.
func (c *NetworksCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- peerStateDesc
	ch <- peerUpDesc
	ch <- advertisedDesc
}

// Collect implements prometheus.Collector. The networks that answered are
// exported even when another failed; the failure is reported as an invalid
// metric.
func (c *NetworksCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	nets, err := c.peers(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(peerStateDesc, err)
	}
	for network, peers := range nets {
		for _, p := range peers {
			peer := p.Address.String()
			for _, st := range peerStates {
				ch <- prometheus.MustNewConstMetric(peerStateDesc, prometheus.GaugeValue, boolValue(p.State == st), network, peer, string(st))
			}
			ch <- prometheus.MustNewConstMetric(peerUpDesc, prometheus.GaugeValue, boolValue(p.Established()), network, peer)
			ch <- prometheus.MustNewConstMetric(advertisedDesc, prometheus.GaugeValue, float64(p.Advertised), network, peer)
		}
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
