// Package daemonsetmetrics exports the daemons' DaemonSet status as
// gauges, so that an alert can tell a node whose daemon is gone from one
// whose daemon is merely slow, without assuming kube-state-metrics.
//
// A daemon pod that is gone takes its scrape target with it: up == 0 never
// fires for it. The DaemonSet still counts the node in its desired number
// and no longer in its available one, and the manager, which outlives any
// one node, publishes both:
//
//	estuary_daemonset_pods{daemonset="<ns>/<name>", state="desired"}    nodes that should run a daemon
//	estuary_daemonset_pods{daemonset="<ns>/<name>", state="scheduled"}  nodes that run one
//	estuary_daemonset_pods{daemonset="<ns>/<name>", state="available"}  daemons ready for minReadySeconds
//	estuary_daemonset_pods{daemonset="<ns>/<name>", state="updated"}    daemons of the current template
//
// The DaemonSet is read by name from the API server every interval; while
// it cannot be read (or does not exist) the series are removed, so no alert
// judges stale numbers.
package daemonsetmetrics

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The states of estuary_daemonset_pods.
const (
	StateDesired   = "desired"
	StateScheduled = "scheduled"
	StateAvailable = "available"
	StateUpdated   = "updated"
)

// Exporter publishes one DaemonSet's numbers. It is a manager Runnable
// that runs on every replica (each replica's /metrics carries them).
type Exporter struct {
	Reader    client.Reader
	DaemonSet types.NamespacedName
	Interval  time.Duration
	Log       logr.Logger
	pods      *prometheus.GaugeVec
}

// New registers the gauge with reg and returns the exporter of ds.
func New(reg prometheus.Registerer, r client.Reader, ds types.NamespacedName, interval time.Duration, log logr.Logger) (*Exporter, error) {
	e := &Exporter{Reader: r, DaemonSet: ds, Interval: interval, Log: log,
		pods: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "estuary_daemonset_pods",
			Help: "The estuary-daemon DaemonSet's pods by state, from its status: desired (nodes that should run one), " +
				"scheduled (nodes that run one), available (ready for minReadySeconds), updated (of the current template).",
		}, []string{"daemonset", "state"}),
	}
	if err := reg.Register(e.pods); err != nil {
		return nil, fmt.Errorf("register estuary_daemonset_pods: %w", err)
	}
	return e, nil
}

// NeedLeaderElection is false: every replica exports.
func (*Exporter) NeedLeaderElection() bool { return false }

// Start refreshes the gauges every Interval until ctx ends.
func (e *Exporter) Start(ctx context.Context) error {
	t := time.NewTicker(e.Interval)
	defer t.Stop()
	for {
		if err := e.Refresh(ctx); err != nil {
			e.Log.Error(err, "export the daemons' DaemonSet status")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh reads the DaemonSet and sets the gauges, or removes them when it
// cannot be read.
func (e *Exporter) Refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var ds appsv1.DaemonSet
	name := e.DaemonSet.String()
	if err := e.Reader.Get(ctx, e.DaemonSet, &ds); err != nil {
		e.pods.DeletePartialMatch(prometheus.Labels{"daemonset": name})
		return fmt.Errorf("read DaemonSet %s: %w", name, err)
	}
	st := ds.Status
	for state, n := range map[string]int32{
		StateDesired: st.DesiredNumberScheduled, StateScheduled: st.CurrentNumberScheduled,
		StateAvailable: st.NumberAvailable, StateUpdated: st.UpdatedNumberScheduled,
	} {
		e.pods.WithLabelValues(name, state).Set(float64(n))
	}
	return nil
}
