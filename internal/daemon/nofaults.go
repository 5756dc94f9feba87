//go:build !faultinject

package daemon

import (
	"errors"

	"github.com/go-logr/logr"

	"github.com/estuary-cni/estuary/internal/daemon/datapath"
)

// faultParts is empty: a build without the faultinject tag (every release
// build) injects no fault.
func faultParts(Config, logr.Logger) []datapath.Part { return nil }

// validateFaults refuses a fault this build cannot inject.
func (c Config) validateFaults() error {
	if c.FaultDataPathFile != "" {
		return errors.New("--fault-datapath-file: this daemon is built without fault injection (build tag faultinject)")
	}
	return nil
}
