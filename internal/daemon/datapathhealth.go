package daemon

// Whether the node's data path keeps up.
//
// The data-path loop (datapath) retries a failed pass and never stops on
// one, and a pass that hangs runs no other, so a daemon whose loop is stuck
// still answers /healthz. What tells the truth is the time of its last
// fully successful pass (datapath.Progress): the daemon is stale when no
// pass has succeeded within staleBound of the last good one (or of its
// start, before the first). Then
//   - /readyz answers 503 with the reason (health.go), and before the
//     first good pass too: a daemon is not ready until it has programmed
//     its node once;
//   - the node status carries a DataPath problem, written when the data
//     path turns stale and removed when it is fresh again, never changed in
//     between (nodestatus.go writes only on change);
//   - a Warning Event DataPathStale goes on the Node when it turns stale, a
//     Normal DataPathRecovered when a pass succeeds again;
//   - estuary_datapath_last_good_pass_timestamp_seconds (datapath/metrics.go)
//     stops moving, for alerts.
//
// /healthz, the liveness probe, does not judge the loop: a restart would
// not unwedge a kernel that does not answer, and the data path already in
// the kernel keeps carrying the pods' traffic while the daemon runs or
// restarts, so killing the daemon for a slow or failing pass would only
// add restarts in a loop to the trouble.

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/datapath"
)

// Reasons of the data path's Events.
const (
	ReasonDataPathStale     = "DataPathStale"
	ReasonDataPathRecovered = "DataPathRecovered"
)

// minStaleBound is the least staleBound: a pass that rewrites many routes
// or waits on a slow API read may take tens of seconds, and a short loop
// period must not make such a pass a stale data path.
const minStaleBound = 60 * time.Second

// staleBoundFor is the stale bound of a loop that resyncs every resync.
// While its passes succeed, a pass ends at least every resync plus one
// pass's duration (a few milliseconds to a few seconds); a failed pass is
// retried after 0.2 s, doubling up to 30 s, so a transient failure is
// retried about ten times within 90 s. Three periods (90 s at the default
// 30 s) thus pass only when the loop has failed every retry, or one pass
// has not returned, for over a minute: no quiet node and no single slow or
// failed pass reaches it.
func staleBoundFor(resync time.Duration) time.Duration {
	return max(3*resync, minStaleBound)
}

// staleBound is the daemon's bound, for its loop's period.
var staleBound = staleBoundFor(datapath.DefaultResync)

// passProgress is the loop's record of its passes (datapath.Progress).
type passProgress interface {
	State() datapath.PassState
}

// maxProblem is the longest data-path problem published on the Node: a
// pass's error joins every part's, and the annotation is read by every
// `kubectl estuary status`.
const maxProblem = 1024

// dataPathVerdict is the judgement of a loop's progress at one moment.
type dataPathVerdict struct {
	// Ready: a pass succeeded within the bound.
	Ready bool
	// Stale: none did within the bound of the last good pass or, before
	// the first, of the loop's start.
	Stale bool
	// Reason says why it is not Ready; "" when it is.
	Reason string
	// LastGood is when the last good pass ended; zero before the first.
	LastGood time.Time
}

// judgeDataPath judges st at now against bound.
func judgeDataPath(st datapath.PassState, now time.Time, bound time.Duration) dataPathVerdict {
	since := st.LastGood
	if since.IsZero() {
		since = st.Started
	}
	age := now.Sub(since)
	v := dataPathVerdict{Ready: !st.LastGood.IsZero() && age <= bound, Stale: age > bound, LastGood: st.LastGood}
	if v.Ready {
		return v
	}
	var b strings.Builder
	if st.LastGood.IsZero() {
		fmt.Fprintf(&b, "no data-path pass has fully succeeded since the daemon started %s ago", roundAge(age))
	} else {
		fmt.Fprintf(&b, "no data-path pass has fully succeeded for %s, over the stale bound of %s", ceilAge(age), bound)
	}
	if st.Running {
		fmt.Fprintf(&b, "; the pass that started %s ago has not returned", roundAge(now.Sub(st.LastStart)))
	}
	switch {
	case st.LastErr != nil:
		fmt.Fprintf(&b, "; the last pass that ended failed: %v", st.LastErr)
	case st.LastStart.IsZero():
		b.WriteString("; no pass has started yet (the API cache has not synced)")
	}
	v.Reason = b.String()
	return v
}

// roundAge rounds d for a message: to the second, or the millisecond below
// one.
func roundAge(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// ceilAge is d for a message that says it is over a bound: rounded up, so
// 90.2 s over a 90 s bound reads 1m31s, not 1m30s.
func ceilAge(d time.Duration) time.Duration {
	unit := time.Second
	if d < time.Second {
		unit = time.Millisecond
	}
	return (d + unit - 1).Truncate(unit)
}

// dataPathStatus is the data-path part of the status given prev, the last
// published (nil: none): a problem when the data path is stale, kept as
// prev has it while it stays stale; nil when it is fresh; prev's while the
// daemon has not yet judged (before its first good pass, within the
// bound), so a restart neither clears nor repeats a stale node's problem.
func (r *statusReporter) dataPathStatus(prev *estuaryv1.NodeDaemonStatus) *estuaryv1.NodeDataPathStatus {
	if r.passes == nil {
		return nil
	}
	var was *estuaryv1.NodeDataPathStatus
	if prev != nil {
		was = prev.DataPath
	}
	v := judgeDataPath(r.passes.State(), time.Now(), r.staleAfter)
	switch {
	case v.Ready:
		return nil
	case !v.Stale || was != nil:
		return was
	}
	st := &estuaryv1.NodeDataPathStatus{Problem: v.Reason}
	if len(st.Problem) > maxProblem {
		st.Problem = st.Problem[:maxProblem-3] + "..."
	}
	if !v.LastGood.IsZero() {
		st.LastGoodPass = &metav1.Time{Time: v.LastGood.Truncate(time.Second)}
	}
	return st
}

// dataPathTransitions logs and records the Event of the data path turning
// stale, or fresh again, from prev (nil: nothing known) to st.
func (r *statusReporter) dataPathTransitions(prev *estuaryv1.NodeDaemonStatus, st estuaryv1.NodeDaemonStatus) {
	var was *estuaryv1.NodeDataPathStatus
	if prev != nil {
		was = prev.DataPath
	}
	switch now := st.DataPath; {
	case now != nil && was == nil:
		log.Info("the node's data path is stale: the daemon is unready", "problem", now.Problem)
		r.events.Record(corev1.EventTypeWarning, ReasonDataPathStale, "ReconcileDataPath",
			"the node's routes, tunnels, neighbours and policy may lag the cluster: "+now.Problem)
	case now == nil && was != nil:
		since := "the daemon's start"
		if was.LastGoodPass != nil {
			since = "the pass of " + was.LastGoodPass.UTC().Format(time.RFC3339)
		}
		log.Info("the node's data path is fresh again", "lastGoodBefore", since)
		r.events.Record(corev1.EventTypeNormal, ReasonDataPathRecovered, "ReconcileDataPath",
			"a data-path pass fully succeeded; none had since "+since)
	}
}

// checkPart runs a check before every pass's read and fails the pass when
// the check fails: the data-path fault (--fault-datapath-file) of a
// faultinject build.
type checkPart struct {
	name  string
	check func(context.Context) error
}

// partFault labels the fault's failures in the loop's metrics.
const partFault = "fault"

func (p checkPart) Name() string { return p.name }

func (p checkPart) Sync(ctx context.Context, _ *datapath.Snapshot) error { return p.check(ctx) }
