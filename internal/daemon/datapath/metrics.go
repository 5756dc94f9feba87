package datapath

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/estuary-cni/estuary/internal/policytranslate"
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
	// lastGood is the end of the last fully successful pass, in Unix
	// seconds; 0 before the first.
	lastGood prometheus.Gauge
	// notEnforced and closed are the policy part's: see policyProblems.
	notEnforced *prometheus.GaugeVec
	closed      prometheus.Gauge
}

// policyKinds are the kind label's values of
// estuary_policy_node_objects_not_enforced.
var policyKinds = []string{policytranslate.KindNetworkPolicy, policytranslate.KindClusterNetworkPolicy, "AdminNetworkPolicy", "BaselineAdminNetworkPolicy"}

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
		lastGood: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "estuary_datapath_last_good_pass_timestamp_seconds",
			Help: "When the last data-path reconcile pass in which every part succeeded ended, in Unix seconds; 0 before the first. The daemon is unready once it is older than its stale bound (docs/status.md).",
		}),
		notEnforced: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "estuary_policy_node_objects_not_enforced",
			Help: "Policy objects the node's last policy computation enforced only in part or not at all (rules dropped or denying all, policies skipped), by kind; each is logged with its fields.",
		}, []string{"kind"}),
		closed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "estuary_policy_compile_problems",
			Help: "Problems the node's last policy compilation met, each costing one endpoint alone (its chain, or both, then drop everything); 0 unless an invalid rule got through translation.",
		}),
	}
	for _, k := range policyKinds {
		m.notEnforced.WithLabelValues(k)
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
	m.lastGood.Describe(ch)
	m.notEnforced.Describe(ch)
	m.closed.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.duration.Collect(ch)
	m.failures.Collect(ch)
	m.lastGood.Collect(ch)
	m.notEnforced.Collect(ch)
	m.closed.Collect(ch)
}

// policyProblems records a policy computation's problems: policytranslate's
// error (one ObjectError per object not enforced as written) and
// Compile's (one error per endpoint or direction it closed).
func (m *Metrics) policyProblems(translateErr, compileErr error) {
	if m == nil {
		return
	}
	count := map[string]int{}
	for _, e := range policytranslate.ObjectErrors(translateErr) {
		count[e.Kind]++
	}
	for _, k := range policyKinds {
		m.notEnforced.WithLabelValues(k).Set(float64(count[k]))
	}
	m.closed.Set(float64(len(joined(compileErr))))
}

// joined is the errors err joins (itself alone when it joins none).
func joined(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok { //nolint:errorlint // the join itself, not a wrapped one
		return j.Unwrap()
	}
	return []error{err}
}

// observe records one pass that started at start and ended at end with
// err.
func (m *Metrics) observe(start, end time.Time, err error) {
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
	if err == nil {
		m.lastGood.Set(float64(end.UnixNano()) / 1e9)
	}
	m.duration.WithLabelValues(result).Observe(end.Sub(start).Seconds())
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
