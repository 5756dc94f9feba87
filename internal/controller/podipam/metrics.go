package podipam

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	allocDuration   *prometheus.HistogramVec
	addresses       *prometheus.GaugeVec
	rebuildProblems prometheus.Counter
	rebuildFailures prometheus.Counter
	auditRuns       prometheus.Counter
	auditAdopted    prometheus.Counter
	auditFreed      prometheus.Counter
}

// NewMetrics creates the metrics and registers them with reg (nil: the
// controller-runtime registry served on the manager's metrics endpoint).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	m := &Metrics{
		allocDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "estuary_ipam_allocation_duration_seconds",
			Help:    "Time to allocate and record a pod's addresses.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}, []string{"result"}),
		addresses: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "estuary_ipam_addresses",
			Help: "Addresses per subnet, by state (used, available, total).",
		}, []string{"subnet", "state"}),
		rebuildProblems: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "estuary_ipam_rebuild_problems_total",
			Help: "Conflicting or unplaceable IPInstances found when rebuilding the allocator.",
		}),
		rebuildFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "estuary_ipam_rebuild_failures_total",
			Help: "Rebuild attempts that could not read the Networks, Subnets or IPInstances; nothing is allocated until one succeeds.",
		}),
		auditRuns: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "estuary_ipam_audit_runs_total",
			Help: "Audits of the records against this manager's memory.",
		}),
		auditAdopted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "estuary_ipam_audit_adopted_total",
			Help: "Records the audit found that this manager did not hold (written by another manager, by hand, or by a create whose answer was lost).",
		}),
		auditFreed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "estuary_ipam_audit_freed_total",
			Help: "Addresses held in memory that no record named at two audits in a row, freed.",
		}),
	}
	reg.MustRegister(m.allocDuration, m.addresses, m.rebuildProblems, m.rebuildFailures, m.auditRuns, m.auditAdopted, m.auditFreed)
	return m
}

func (m *Metrics) observe(start time.Time, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.allocDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
}
