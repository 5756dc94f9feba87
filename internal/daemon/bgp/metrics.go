package bgp

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	peerUpDesc = prometheus.NewDesc("estuary_bgp_peer_up",
		"Whether the BGP session with the peer is Established (1) or not (0).",
		[]string{"peer"}, nil)
	advertisedDesc = prometheus.NewDesc("estuary_bgp_advertised_prefixes",
		"Number of prefixes the node's BGP speaker announces.",
		nil, nil)
)

// collectTimeout bounds how long a scrape waits for the speaker.
const collectTimeout = 5 * time.Second

// Collector exports the state of the node's current speaker to Prometheus.
// The daemon replaces its speaker on restarts and configuration changes, so
// the collector asks current for the speaker at every scrape; a nil speaker
// (no BGP network on the node) exports nothing.
type Collector struct {
	current func() *Speaker
}

// NewCollector returns a collector of the speaker current returns.
func NewCollector(current func() *Speaker) *Collector {
	return &Collector{current: current}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- peerUpDesc
	ch <- advertisedDesc
}

// Collect implements prometheus.Collector.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.current()
	if s == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), collectTimeout)
	defer cancel()
	peers, err := s.Peers(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(peerUpDesc, err)
		return
	}
	for _, p := range peers {
		up := 0.0
		if p.Established() {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(peerUpDesc, prometheus.GaugeValue, up, p.Address.String())
	}
	ch <- prometheus.MustNewConstMetric(advertisedDesc, prometheus.GaugeValue, float64(len(s.Advertised())))
}

var peerStateDesc = prometheus.NewDesc("estuary_bgp_peer_state",
	"The session state of each BGP peer of each BGP network of the node: 1 for the current state, 0 for the others.",
	[]string{"network", "peer", "state"}, nil)

// peerStates are the states peer_state reports, in FSM order.
var peerStates = []SessionState{StateIdle, StateConnect, StateActive, StateOpenSent, StateOpenConfirm,
	StateEstablished, StateUnknown}

// NetworksCollector exports the session state of every speaker of the node,
// one per BGP network, as the estuary_bgp_peer_state gauge family.
type NetworksCollector struct {
	peers func(context.Context) (map[string][]PeerStatus, error)
}

// NewNetworksCollector returns a collector of what peers reports: per BGP
// network, the status of its speaker's peers (netsync.Syncer.BGPPeers).
func NewNetworksCollector(peers func(context.Context) (map[string][]PeerStatus, error)) *NetworksCollector {
	return &NetworksCollector{peers: peers}
}

// Describe implements prometheus.Collector.
func (c *NetworksCollector) Describe(ch chan<- *prometheus.Desc) { ch <- peerStateDesc }

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
			for _, st := range peerStates {
				v := 0.0
				if p.State == st {
					v = 1
				}
				ch <- prometheus.MustNewConstMetric(peerStateDesc, prometheus.GaugeValue, v, network, p.Address.String(), string(st))
			}
		}
	}
}
