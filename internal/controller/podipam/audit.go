package podipam

// The audit is the backstop for everything no event told the manager:
// records are cluster-scoped and carry no ownerReferences, so when a pod
// goes while the manager is down, with its namespace, or through the pod
// garbage collector after its node was deleted, nothing but the manager
// releases its addresses. Every AuditInterval the leader reads the records
// as the API server holds them (the cache, fenced by a write or a live
// list of their versions, as the rebuild reads them: fence.go) and
//
//   - hands every record this manager does not hold to the pod controller
//     as an adoption (a record written by another manager during a split
//     brain, by an administrator, or whose create answer was lost): the
//     address is held for the record's pod before anything else happens;
//   - sends every pod name that holds or is recorded to hold an address
//     through the pod controller, which settles it as for any event: a pod
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
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// defaultAuditInterval is how often the audit runs.
const defaultAuditInterval = 2 * time.Minute

// auditor runs the audit while this manager leads.
type auditor struct {
	r        *Reconciler
	interval time.Duration
	pods     chan event.GenericEvent
	// strays are the addresses held in memory only at the last audit.
	strays map[ipam.Record]bool
}

// NeedLeaderElection returns true: only the leader audits.
func (a *auditor) NeedLeaderElection() bool { return true }

// Start audits once the rebuild is done, then every interval until ctx
// ends.
func (a *auditor) Start(ctx context.Context) error {
	if err := a.r.ready.wait(ctx); err != nil {
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
	read, err := a.r.readRecords(ctx)
	if err != nil {
		return err
	}
	keys := map[string]bool{}
	adopted := 0
	for key, hs := range fromInstances(read.items) {
		keys[key] = true
		for _, hd := range hs {
			if !a.r.held.holds(key, hd.name) && a.r.pending.add(key, hd) {
				adopted++
			}
		}
	}
	for _, key := range a.r.held.keys() {
		keys[key] = true
	}
	freed := a.freeStrays(ctx, read.items)
	for key := range keys {
		ns, name := splitKey(key)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		select {
		case a.pods <- event.GenericEvent{Object: pod}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a.r.Metrics.auditRuns.Inc()
	a.r.Metrics.auditAdopted.Add(float64(adopted))
	a.r.Metrics.auditFreed.Add(float64(freed))
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
	for _, rec := range a.r.Alloc.Records() {
		name := estuaryv1.InstanceName(rec.Addr)
		if recorded[name] || a.r.held.holds(rec.Owner, name) {
			continue
		}
		if !a.strays[rec] {
			next[rec] = true
			continue
		}
		if err := a.r.Alloc.Release(rec.Subnet, rec.Addr, rec.Owner); err != nil && !errors.Is(err, ipam.ErrNotAllocated) {
			log.FromContext(ctx).Error(err, "free an address held in memory only", "address", rec.Addr, "owner", rec.Owner)
			continue
		}
		log.FromContext(ctx).Info("freed an address no record names", "address", rec.Addr, "owner", rec.Owner)
		freed++
	}
	a.strays = next
	return freed
}

// pendingAdoptions are records the audit found that this manager did not
// hold, waiting for their pod name's next reconcile.
type pendingAdoptions struct {
	mu    sync.Mutex
	byKey map[string][]holding
}

// add queues hd for key unless it is queued already.
func (p *pendingAdoptions) add(key string, hd holding) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, q := range p.byKey[key] {
		if q.name == hd.name {
			return false
		}
	}
	if p.byKey == nil {
		p.byKey = map[string][]holding{}
	}
	p.byKey[key] = append(p.byKey[key], hd)
	return true
}

func (p *pendingAdoptions) take(key string) []holding {
	p.mu.Lock()
	defer p.mu.Unlock()
	hs := p.byKey[key]
	delete(p.byKey, key)
	return hs
}

// adopt holds, for the pod name being reconciled, the records the audit
// found that this manager did not hold. A record whose address the
// allocator holds for another pod name is left for a later audit: that
// name's own reconcile finds the record is not its and gives the address up.
func (r *Reconciler) adopt(ctx context.Context, key string, held []holding) []holding {
	for _, hd := range r.pending.take(key) {
		if holdsName(held, hd.name) {
			continue
		}
		err := r.Alloc.Assign(hd.lease.Subnet, hd.lease.Addr, key)
		if err == nil && hd.phase == estuaryv1.IPInstanceRetained {
			err = r.Alloc.Retain(hd.lease.Subnet, hd.lease.Addr, key)
		}
		if err != nil {
			if !errors.Is(err, ipam.ErrInUse) {
				log.FromContext(ctx).Error(err, "adopt a record", "pod", key, "address", hd.lease.Addr)
			}
			continue
		}
		log.FromContext(ctx).Info("adopted a record this manager did not hold", "pod", key, "address", hd.lease.Addr)
		held = append(held, hd)
	}
	r.held.set(key, held)
	return held
}

func holdsName(hs []holding, name string) bool {
	for _, hd := range hs {
		if hd.name == name {
			return true
		}
	}
	return false
}
