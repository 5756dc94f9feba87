package cniserver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The commands the metrics are labelled with: the CNI verbs the runtime
// sends (STATUS is the health probe's and is not measured).
const (
	CommandAdd   = "ADD"
	CommandDel   = "DEL"
	CommandCheck = "CHECK"
	CommandGC    = "GC"
)

var commands = []string{CommandAdd, CommandDel, CommandCheck, CommandGC}

// Results of a request, the result label of the duration histogram.
const (
	resultSuccess = "success"
	resultError   = "error"
)

// requestBuckets span a repeated ADD answered from the store (well under a
// millisecond) to an ADD that waits out the manager's allocation or an
// underlay's duplicate address probe (the address timeout is 30s).
var requestBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Metrics are the CNI server's Prometheus metrics: every request's duration
// by command and result, and every failed request by command and Reason.
// It is a prometheus.Collector; register it where /metrics is served. A nil
// *Metrics records nothing.
type Metrics struct {
	duration *prometheus.HistogramVec
	errors   *prometheus.CounterVec
	gate     *prometheus.HistogramVec
}

// Outcomes of an ADD's policy admission (PolicyGate), the outcome label of
// estuary_cni_add_policy_wait_seconds: a pass computed the pod's policy,
// the pod was held pending, or the admission failed.
const (
	outcomeComputed = "computed"
	outcomePending  = "pending"
	outcomeError    = "error"
)

// gateBuckets span an admission that finds the table written (a
// millisecond) to one that waits out its bound (a second) and holds.
var gateBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

var _ prometheus.Collector = (*Metrics)(nil)

// NewMetrics returns the metrics with a series for every command, result and
// reason at zero, so a rate over them exists before the first failure.
func NewMetrics() *Metrics {
	m := &Metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "estuary_cni_request_duration_seconds",
			Help:    "Time the daemon took to answer a CNI request, by command (ADD, DEL, CHECK, GC) and result (success, error).",
			Buckets: requestBuckets,
		}, []string{"command", "result"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "estuary_cni_request_errors_total",
			Help: "CNI requests the daemon failed, by command and reason (invalid_args, ipam_timeout, ipam_refused, bgp_session, netns, dataplane, segment_check, store, mismatch, canceled, internal).",
		}, []string{"command", "reason"}),
		gate: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "estuary_cni_add_policy_wait_seconds",
			Help:    "Time an ADD waited for the new pod's network policy verdicts to be in the kernel, by outcome (computed: its policy; pending: held isolated until it is computed; error).",
			Buckets: gateBuckets,
		}, []string{"outcome"}),
	}
	for _, o := range []string{outcomeComputed, outcomePending, outcomeError} {
		m.gate.WithLabelValues(o)
	}
	for _, c := range commands {
		m.duration.WithLabelValues(c, resultSuccess)
		m.duration.WithLabelValues(c, resultError)
		for _, r := range Reasons {
			m.errors.WithLabelValues(c, string(r))
		}
	}
	return m
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.duration.Describe(ch)
	m.errors.Describe(ch)
	m.gate.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.duration.Collect(ch)
	m.errors.Collect(ch)
	m.gate.Collect(ch)
}

// observe records one request of command that started at start and ended
// with err.
func (m *Metrics) observe(command string, start time.Time, err error) {
	if m == nil {
		return
	}
	result := resultSuccess
	if err != nil {
		result = resultError
		m.errors.WithLabelValues(command, string(ReasonOf(err))).Inc()
	}
	m.duration.WithLabelValues(command, result).Observe(time.Since(start).Seconds())
}

// observeGate records one policy admission that started at start.
func (m *Metrics) observeGate(outcome string, start time.Time) {
	if m == nil {
		return
	}
	switch outcome {
	case outcomeComputed, outcomePending, outcomeError:
	default:
		outcome = outcomeComputed
	}
	m.gate.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
}
