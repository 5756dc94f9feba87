// Package memlimit sets the Go runtime's soft memory limit (GOMEMLIMIT) of
// estuary's long-running processes from their cgroup's memory limit.
//
// Without it, the garbage collector lets the heap grow to twice what is
// live before it collects (GOGC=100), whatever the container's limit: at
// scale the manager and the node daemon hold every Pod and IPInstance of
// the cluster, a storm of changes makes as much garbage again, and the
// kernel kills the process at its limit while most of its heap is garbage.
// With the soft limit at Ratio of the cgroup's, the collector runs more
// often as the heap nears it, so a process whose live heap fits is not
// killed. An explicit GOMEMLIMIT (or AUTOMEMLIMIT=off) in the environment
// wins; a process without a cgroup limit keeps Go's default.
package memlimit

import (
	"errors"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
)

// Ratio is the share of the cgroup's memory limit the Go runtime may use:
// the rest is for what the runtime does not count (thread stacks outside
// the heap, cgo, the page cache of files written) and for headroom.
const Ratio = 0.9

// Apply sets the soft memory limit from the cgroup and logs what it did.
func Apply(log logr.Logger) {
	limit, err := memlimit.SetGoMemLimitWithOpts(memlimit.WithRatio(Ratio))
	switch {
	case errors.Is(err, memlimit.ErrNoCgroup):
		log.Info("no memory cgroup: Go's default memory limit kept")
	case err != nil:
		log.Info("Go's memory limit not set from the cgroup", "error", err.Error())
	case limit > 0:
		log.Info("Go's memory limit set from the cgroup", "bytes", limit, "ratio", Ratio)
	default:
		log.Info("Go's memory limit left as is: GOMEMLIMIT set, or no cgroup limit")
	}
}
