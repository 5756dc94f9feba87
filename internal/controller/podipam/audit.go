package podipam

// The audit is the backstop for everything no event told the manager:
// records are cluster-scoped and carry no ownerReferences, so when a pod
// goes while the manager is down, with its namespace, or through the pod
// garbage collector after its node was deleted, nothing but the manager
// releases its addresses. Every AuditInterval the leader reads the records
// as the API server holds them (the cache, fenced by a write or a live
// list of their versions, as the rebuild reads them: fence.go) and
//
//   - hands every record this manager does not hold to its holder's
//     controller (pod or pool) as an adoption (a record written by another manager during a split
//     brain, by an administrator, or whose create answer was lost): the
//     address is held for the record's pod before anything else happens;
//   - sends every key that holds or is recorded to hold an address to its
//     controller: a pod name to the pod controller, which settles it as for
//     any event, a workload's pool to the pool controller: a pod
//     that is gone or finished releases, a live pod has its records
//     confirmed (missing ones created again), its extra addresses released
//     and its missing families completed;
//   - frees an address the allocator holds that no record names and no pod
//     name holds, once two audits in a row found it so (an allocation in
//     flight is recorded long before the next audit): what a conflict or a
//     split brain left in memory only.
//
// The audit changes nothing itself; each pod name is settled by its own
// reconcile, one at a time, as for any other event.

import (
	"context"
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/workload"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// defaultAuditInterval is how often the audit runs.
const defaultAuditInterval = 2 * time.Minute

// auditor runs the audit while this manager leads.
type auditor struct {
	records  *recordReader
	alloc    Allocator
	held     *holdings
	pending  *pendingAdoptions
	metrics  *Metrics
	ready    *readiness
	interval time.Duration
	pods     chan event.TypedGenericEvent[types.NamespacedName]
	pools    chan event.TypedGenericEvent[workload.Ref]
	// strays are the addresses held in memory only at the last audit.
	strays map[ipam.Record]bool
}

// NeedLeaderElection returns true: only the leader audits.
func (a *auditor) NeedLeaderElection() bool { return true }

// Start audits once the rebuild is done, then every interval until ctx
// ends.
func (a *auditor) Start(ctx context.Context) error {
	if err := a.ready.wait(ctx); err != nil {
		return nil //nolint:nilerr // ctx ended or the rebuild failed: the manager stops either way
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := a.run(ctx); err != nil {
			log.FromContext(ctx).Error(err, "audit")
		}
	}, a.interval)
	return nil
}

func (a *auditor) run(ctx context.Context) error {
	read, err := a.records.readRecords(ctx)
	if err != nil {
		return err
	}
	keys := map[string]bool{}
	adopted := 0
	for key, hs := range fromInstances(read.items) {
		keys[key] = true
		for _, hd := range hs {
			if !a.held.holds(key, hd.name) && a.pending.add(key, hd) {
				adopted++
			}
		}
	}
	for _, key := range a.held.keys() {
		keys[key] = true
	}
	freed := a.freeStrays(ctx, read.items)
	for key := range keys {
		if err := a.send(ctx, key); err != nil {
			return err
		}
	}
	a.metrics.auditRuns.Inc()
	a.metrics.auditAdopted.Add(float64(adopted))
	a.metrics.auditFreed.Add(float64(freed))
	log.FromContext(ctx).V(1).Info("audit", "records", len(read.items), "readLive", read.live, "podNames", len(keys), "adopted", adopted, "freed", freed)
	return nil
}

// freeStrays frees the addresses held in memory that no record names and
// no pod name holds, now and at the last audit.
func (a *auditor) freeStrays(ctx context.Context, records []estuaryv1.IPInstance) int {
	recorded := make(map[string]bool, len(records))
	for i := range records {
		recorded[records[i].Name] = true
	}
	next := map[ipam.Record]bool{}
	freed := 0
	for _, rec := range a.alloc.Records() {
		name := estuaryv1.InstanceName(rec.Addr)
		if recorded[name] || a.held.holds(rec.Owner, name) {
			continue
		}
		if !a.strays[rec] {
			next[rec] = true
			continue
		}
		if err := a.alloc.Release(rec.Subnet, rec.Addr, rec.Owner); err != nil && !errors.Is(err, ipam.ErrNotAllocated) {
			log.FromContext(ctx).Error(err, "free an address held in memory only", "address", rec.Addr, "owner", rec.Owner)
			continue
		}
		log.FromContext(ctx).Info("freed an address no record names", "address", rec.Addr, "owner", rec.Owner)
		freed++
	}
	a.strays = next
	return freed
}

// send queues key with its controller, waiting for it to take the request.
func (a *auditor) send(ctx context.Context, key string) error {
	if pool, ok := poolOf(key); ok {
		select {
		case a.pools <- event.TypedGenericEvent[workload.Ref]{Object: poolRequest(pool)}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	pod, _ := podOf(key)
	select {
	case a.pods <- event.TypedGenericEvent[types.NamespacedName]{Object: pod}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
