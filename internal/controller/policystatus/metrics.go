package policystatus

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// notEnforced keeps which objects of each kind have problems and the gauge
// that counts them.
type notEnforced struct {
	gauge *prometheus.GaugeVec
	mu    sync.Mutex
	set   map[string]map[types.NamespacedName]bool
}

// newNotEnforced registers the gauge with reg (nil: controller-runtime's
// registry, served on the manager's metrics endpoint); a gauge of the same
// name already registered (the manager started twice in one process) is
// shared.
func newNotEnforced(reg prometheus.Registerer) (*notEnforced, error) {
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "estuary_policy_objects_not_enforced",
		Help: "Policy objects, by kind, of which some part no node enforces as written " +
			"(a NetworkPolicy's PolicyNotEnforced Event, a cluster policy's Accepted=False condition).",
	}, []string{"kind"})
	if err := reg.Register(g); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return nil, err
		}
		g = already.ExistingCollector.(*prometheus.GaugeVec)
	}
	return &notEnforced{gauge: g, set: map[string]map[types.NamespacedName]bool{}}, nil
}

// record notes whether the object key of kind has problems.
func (n *notEnforced) record(kind string, key types.NamespacedName, bad bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.set[kind]
	if s == nil {
		s = map[types.NamespacedName]bool{}
		n.set[kind] = s
	}
	if bad {
		s[key] = true
	} else {
		delete(s, key)
	}
	n.gauge.WithLabelValues(kind).Set(float64(len(s)))
}
