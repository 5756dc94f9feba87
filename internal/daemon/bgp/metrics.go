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
