package memlimit

import (
	"runtime/debug"
	"testing"

	"github.com/go-logr/logr"
)

func TestExplicitGOMEMLIMITWins(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "123MiB")
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	Apply(logr.Discard())
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("memory limit %d after Apply with GOMEMLIMIT set, want it left at %d", got, before)
	}
}

func TestOffLeavesTheLimit(t *testing.T) {
	t.Setenv("AUTOMEMLIMIT", "off")
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	Apply(logr.Discard())
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("memory limit %d after Apply with AUTOMEMLIMIT=off, want it left at %d", got, before)
	}
}
