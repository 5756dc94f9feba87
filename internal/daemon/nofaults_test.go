//go:build !faultinject

package daemon

import (
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

// A daemon built without the faultinject tag refuses a data-path fault it
// cannot inject, naming the flag, and adds no fault to the loop.
func TestValidateRefusesAFaultThisBuildCannotInject(t *testing.T) {
	c := validConfig()
	c.FaultDataPathFile = "/run/estuary/datapath-fault"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "--fault-datapath-file") || !strings.Contains(err.Error(), "faultinject") {
		t.Errorf("Validate with a fault file = %v, want an error naming --fault-datapath-file and the faultinject tag", err)
	}
	if parts := faultParts(c, logr.Discard()); len(parts) != 0 {
		t.Errorf("faultParts = %d parts, want none", len(parts))
	}
}
