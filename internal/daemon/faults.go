//go:build faultinject

package daemon

import (
	"github.com/go-logr/logr"

	"github.com/estuary-cni/estuary/internal/daemon/datapath"
	"github.com/estuary-cni/estuary/internal/faultinject"
)

// faultParts are the data-path faults cfg asks for (--fault-datapath-file),
// run before every pass's read. Only a faultinject build has them.
func faultParts(cfg Config, log logr.Logger) []datapath.Part {
	if cfg.FaultDataPathFile == "" {
		return nil
	}
	log.Info("fault injection: data-path passes fail while the file exists", "file", cfg.FaultDataPathFile)
	return []datapath.Part{checkPart{name: partFault, check: faultinject.DataPathFault{Path: cfg.FaultDataPathFile}.Check}}
}

// validateFaults accepts every fault setting: this build injects them.
func (c Config) validateFaults() error { return nil }
