package netsync

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The parts of a reconcile pass, the part label of
// estuary_datapath_reconcile_failures_total.
const (
	PartLocalPods = "local_pods"
	PartRead      = "read"
	PartOverlay   = "overlay"
	PartUnderlay  = "underlay"
	PartBGP       = "bgp"
	PartFastPath  = "fastpath"
	PartPolicy    = "policy"
	// PartOther is a failure no part claimed.
	PartOther = "other"
)

// Parts lists every part, in the order a pass runs them.
var Parts = []string{PartLocalPods, PartRead, PartPolicy, PartOverlay, PartUnderlay, PartBGP, PartFastPath, PartOther}

// reconcileBuckets span a pass with nothing to change (a few milliseconds)
// to one that rewrites many routes or waits on a slow API read.
var reconcileBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// Metrics are the data-path loop's Prometheus metrics: each pass's duration
// by result, and the parts that failed. It is a prometheus.Collector;
// register it where /metrics is served. A nil *Metrics records nothing.
type Metrics struct {
	duration *prometheus.HistogramVec
	failures *prometheus.CounterVec
}

var _ prometheus.Collector = (*Metrics)(nil)

// NewMetrics returns the metrics with every result and part at zero.
func NewMetrics() *Metrics {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "estuary_datapath_reconcile_duration_seconds",
			Help:    "Time one pass of the node's data-path reconcile took, by result (success, error).",
			Buckets: reconcileBuckets,
		}, []string{"result"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "estuary_datapath_reconcile_failures_total",
			Help: "Parts of data-path reconcile passes that failed (local_pods, read, overlay, underlay, bgp, fastpath, other); a failed pass is retried with backoff.",
		}, []string{"part"}),
	}
	m.duration.WithLabelValues("success")
	m.duration.WithLabelValues("error")
	for _, p := range Parts {
		m.failures.WithLabelValues(p)
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.duration.Describe(ch)
	m.failures.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.duration.Collect(ch)
	m.failures.Collect(ch)
}

// observe records one pass that started at start and ended with err.
func (m *Metrics) observe(start time.Time, err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
		for _, p := range failedParts(err) {
			m.failures.WithLabelValues(p).Inc()
		}
	}
	m.duration.WithLabelValues(result).Observe(time.Since(start).Seconds())
}

// partError marks the error of one part of a pass.
type partError struct {
	part string
	err  error
}

func (e *partError) Error() string { return e.err.Error() }
func (e *partError) Unwrap() error { return e.err }

// inPart marks err as part's failure; nil stays nil.
func inPart(part string, err error) error {
	if err == nil {
		return nil
	}
	return &partError{part: part, err: err}
}

// failedParts lists, once each, the parts whose failures err holds (through
// errors.Join and %w), or PartOther when it holds none.
func failedParts(err error) []string {
	var parts []string
	var walk func(error)
	walk = func(err error) {
		switch u := err.(type) { //nolint:errorlint // walks the whole tree itself, every branch of a join
		case nil:
		case *partError:
			if !slices.Contains(parts, u.part) {
				parts = append(parts, u.part)
			}
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	if len(parts) == 0 {
		parts = []string{PartOther}
	}
	return parts
}
