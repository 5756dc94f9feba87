package podipam

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/estuary-cni/estuary/pkg/ipam"
)

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	allocDuration   *prometheus.HistogramVec
	addresses       *prometheus.GaugeVec
	capacity        *prometheus.GaugeVec
	rebuildProblems prometheus.Counter
	rebuildFailures prometheus.Counter
	auditRuns       prometheus.Counter
	auditAdopted    prometheus.Counter
	auditFreed      prometheus.Counter
	historyFailures prometheus.Counter
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
			Help: "Addresses per subnet by state, each address in one state: used (allocated or retained), " +
				"reserved (reserved for given workloads and not held) and available (free for any pod). " +
				"A subnet's states sum to its capacity, plus the held addresses a configuration change left outside it.",
		}, []string{"subnet", "state"}),
		capacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "estuary_ipam_subnet_capacity_addresses",
			Help: "Addresses a subnet can give pods: its range without the network, broadcast and gateway addresses " +
				"and the excluded ones; reserved addresses are counted.",
		}, []string{"subnet"}),
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
		historyFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "estuary_ipam_address_history_write_failures_total",
			Help: "Address history writes that failed (retried later) or entries dropped from a full queue; allocation never waits for them.",
		}),
	}
	reg.MustRegister(m.allocDuration, m.addresses, m.capacity, m.rebuildProblems, m.rebuildFailures, m.auditRuns, m.auditAdopted, m.auditFreed,
		m.historyFailures)
	return m
}

// The states of estuary_ipam_addresses. They are disjoint: no address is
// counted in two, so a sum over them counts each address once.
const (
	stateUsed      = "used"
	stateReserved  = "reserved"
	stateAvailable = "available"
)

// setSubnet publishes the counts of subnet name.
func (m *Metrics) setSubnet(name string, st ipam.Stats) {
	m.capacity.WithLabelValues(name).Set(float64(st.Total))
	m.addresses.WithLabelValues(name, stateUsed).Set(float64(st.Used))
	m.addresses.WithLabelValues(name, stateReserved).Set(float64(reservedFree(st)))
	m.addresses.WithLabelValues(name, stateAvailable).Set(float64(st.Available))
}

// forgetSubnet removes the series of a subnet the allocator no longer has,
// so a deleted subnet does not stay in every sum.
func (m *Metrics) forgetSubnet(name string) {
	m.capacity.DeletePartialMatch(prometheus.Labels{"subnet": name})
	m.addresses.DeletePartialMatch(prometheus.Labels{"subnet": name})
}

// reservedFree is the number of reserved addresses no one holds: the part of
// the capacity that is neither held nor available to any pod. Total counts
// the reserved addresses, Available does not, and Used counts the held ones
// inside the capacity and the stranded ones outside it, so
// Total = Available + reservedFree + (Used - Stranded).
func reservedFree(st ipam.Stats) uint64 {
	inside := st.Used - st.Stranded
	if st.Total < st.Available+inside {
		return 0
	}
	return st.Total - st.Available - inside
}

func (m *Metrics) observe(start time.Time, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}
	m.allocDuration.WithLabelValues(result).Observe(time.Since(start).Seconds())
}
