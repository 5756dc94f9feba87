package daemon

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/daemon/datapath"
)

// daemonMetrics are the metrics the daemon's parts record, made once per Run
// and registered in the registry /metrics serves (health.go), never in a
// global one the endpoint does not read.
type daemonMetrics struct {
	cni      *cniserver.Metrics
	datapath *datapath.Metrics
}

func newDaemonMetrics() daemonMetrics {
	return daemonMetrics{cni: cniserver.NewMetrics(), datapath: datapath.NewMetrics()}
}

// collectors lists them for the /metrics registry.
func (m daemonMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.cni, m.datapath}
}
