package podipam

// A workload's pool: the addresses kept for a workload (Retained) or
// reserved for it (Reserved), held under the workload's key
// (namespace/Kind/name, see package workload) rather than a pod's.
//
// The pool has a reconcile of its own, on a request whose name is Kind/name
// (a pod name never has a slash): it adopts records written without this
// manager (kubectl estuary reserve), forgets addresses whose records were
// released by hand, releases expired ones and comes back at the next
// deadline. Pods of the workload take from the pool in their own
// reconciles, so the pool's holdings change only through holdings.take and
// holdings.add, never by replacing the key's list: a holding is in the pool
// or in a pod's hands, never both.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// indexRecordKey indexes IPInstances by recordKey in the manager's cache.
const indexRecordKey = "podipam.recordKey"

// isPoolName: a request name with a slash is a workload's Kind/name.
func isPoolName(name string) bool { return strings.Contains(name, "/") }

// isPoolKey: the key is a workload's (namespace/Kind/name), not a pod's.
func isPoolKey(key string) bool { return strings.Count(key, "/") >= 2 }

// kicks feeds keys to the pod controller from outside an event: a pool to
// look at again, a pod waiting for an address.
type kicks struct {
	ch chan event.GenericEvent
	mu sync.Mutex
	// waiting lists, per record name, the pods waiting for its address.
	waiting map[string][]types.NamespacedName
}

func newKicks() *kicks {
	return &kicks{ch: make(chan event.GenericEvent, 1024), waiting: map[string][]types.NamespacedName{}}
}

// kick queues key (a pod's or a workload's) for a reconcile; when the
// queue is full the audit comes by anyway.
func (r *Reconciler) kick(key string) {
	ns, name, _ := strings.Cut(key, "/")
	select {
	case r.kicks.ch <- event.GenericEvent{Object: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}}:
	default:
	}
}

// waitFor notes that pod waits for the address of record name.
func (r *Reconciler) waitFor(name string, pod types.NamespacedName) {
	r.kicks.mu.Lock()
	defer r.kicks.mu.Unlock()
	if !slices.Contains(r.kicks.waiting[name], pod) {
		r.kicks.waiting[name] = append(r.kicks.waiting[name], pod)
	}
}

// wake queues the pods waiting for the address of record name.
func (r *Reconciler) wake(name string) {
	r.kicks.mu.Lock()
	pods := r.kicks.waiting[name]
	delete(r.kicks.waiting, name)
	r.kicks.mu.Unlock()
	for _, p := range pods {
		r.kick(p.Namespace + "/" + p.Name)
	}
}

// reconcilePool settles a workload's pool.
func (r *Reconciler) reconcilePool(ctx context.Context, key string) (ctrl.Result, error) {
	var list estuaryv1.IPInstanceList
	if err := r.Client.List(ctx, &list, client.MatchingFields{indexRecordKey: key}, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("list ipinstances of %s: %w", key, err)
	}
	pending := r.pending.take(key)
	for _, hd := range fromInstances(list.Items)[key] {
		if _, ok := r.held.find(key, hd.name); !ok {
			pending = append(pending, hd)
		}
	}
	recorded := map[string]bool{}
	for i := range list.Items {
		recorded[list.Items[i].Name] = true
	}
	for _, hd := range pending {
		if recorded[hd.name] {
			r.adoptPooled(ctx, key, hd)
		}
	}
	if done, err := r.releaseIfMachineGone(ctx, key); err != nil || done {
		return ctrl.Result{}, err
	}
	if gone, err := r.namespaceGone(ctx, key); err != nil || gone {
		if err != nil {
			return ctrl.Result{}, err
		}
		all := r.held.takeInHand(key, func(holding, []holding) bool { return true })
		log.FromContext(ctx).Info("namespace deleted: releasing what its workload kept", "workload", key, "addresses", addrs(all))
		return ctrl.Result{}, r.releaseTaken(ctx, key, all)
	}
	now := time.Now()
	gone := r.held.take(key, func(hd holding, _ []holding) bool {
		return !recorded[hd.name] && now.Sub(hd.recorded) > cacheLag
	})
	for _, hd := range gone {
		if err := r.Alloc.Release(hd.lease.Subnet, hd.lease.Addr, key); err != nil && !errors.Is(err, ipam.ErrNotAllocated) {
			log.FromContext(ctx).Error(err, "forget an address released by hand", "workload", key, "address", hd.lease.Addr)
		}
		log.FromContext(ctx).Info("address released by hand", "workload", key, "address", hd.lease.Addr)
	}
	expired := r.held.takeInHand(key, func(hd holding, _ []holding) bool {
		return !hd.expires.IsZero() && !hd.expires.After(now)
	})
	if len(expired) > 0 {
		log.FromContext(ctx).Info("retention expired", "workload", key, "addresses", addrs(expired))
		if err := r.releaseTaken(ctx, key, expired); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: max(expiresIn(r.held.get(key), time.Now()), 0)}, nil
}

// adoptPooled holds hd, a record of key's that this manager does not hold,
// for the workload, if the allocator has the address free (or already
// holds it for the workload).
func (r *Reconciler) adoptPooled(ctx context.Context, key string, hd holding) {
	if r.held.isInHand(hd.name) {
		return // a hand-over or release is writing it: its outcome decides
	}
	if rec, err := r.Alloc.Lookup(hd.lease.Subnet, hd.lease.Addr); err == nil {
		if rec.Owner != key {
			return // another key holds it: that key's reconcile or the audit settles it
		}
	} else if !errors.Is(err, ipam.ErrNotAllocated) {
		log.FromContext(ctx).Error(err, "adopt a record", "workload", key, "address", hd.lease.Addr)
		return
	} else if err := r.Alloc.Assign(hd.lease.Subnet, hd.lease.Addr, key); err != nil {
		log.FromContext(ctx).Error(err, "adopt a record", "workload", key, "address", hd.lease.Addr)
		return
	}
	_ = r.Alloc.Retain(hd.lease.Subnet, hd.lease.Addr, key)
	hd.recorded = time.Now()
	if !r.held.adoptInto(key, hd) {
		return // back in the list, or taken for a write, since the list was read
	}
	log.FromContext(ctx).Info("holding a record for its workload", "workload", key, "address", hd.lease.Addr, "phase", hd.phase)
}

// releaseTaken deletes the records of holdings already taken out of key's
// list and frees their addresses; a holding whose record cannot be deleted
// goes back to key.
func (r *Reconciler) releaseTaken(ctx context.Context, key string, hs []holding) error {
	defer r.held.putDown(hs)
	for i, hd := range hs {
		err := r.deleteRecord(ctx, key, hd)
		if he, ok := asHeldElsewhere(err); ok {
			err = r.giveTo(ctx, key, hd, he.record)
		} else if err == nil {
			if rerr := r.Alloc.Release(hd.lease.Subnet, hd.lease.Addr, key); rerr != nil && !errors.Is(rerr, ipam.ErrNotAllocated) {
				log.FromContext(ctx).Error(rerr, "release", "workload", key, "address", hd.lease.Addr)
			}
		}
		if err != nil {
			for _, back := range hs[i:] {
				r.held.add(key, back)
			}
			return err
		}
		r.wake(hd.name)
	}
	return nil
}

// takePooled gives pod, which holds nothing yet, what its workload keeps:
// at most one address per family of req that the pool has in req's network
// (in one of the family's named subnets, when it names some). Each is
// handed over with one record update. It returns the holdings taken and
// the families still to allocate.
func (r *Reconciler) takePooled(ctx context.Context, key string, pod *corev1.Pod, f facts, req ipam.Request) ([]holding, []family.Family, error) {
	wanted := requestFamilies(req)
	if f.owner.Kind == "" {
		return nil, wanted, nil
	}
	pool := f.owner.Key()
	fits := func(hd holding, chosen []holding) bool { return fitsRequest(hd, req, wanted, chosen) }
	// What the pod of the same name used last comes first (a StatefulSet's
	// ordinal gets its reserved address back), then anything that fits.
	taken := r.held.takeInHand(pool, func(hd holding, chosen []holding) bool { return hd.pod == pod.Name && fits(hd, chosen) })
	taken = append(taken, r.held.takeInHand(pool, func(hd holding, chosen []holding) bool { return fits(hd, append(taken, chosen...)) })...)
	if len(taken) == 0 {
		return nil, wanted, nil
	}
	got, err := r.handOver(ctx, pool, key, pod, f, taken, len(wanted))
	if err != nil {
		return nil, nil, err
	}
	var rest []family.Family
	for _, fam := range wanted {
		if !slices.ContainsFunc(got, func(hd holding) bool { return hd.lease.Family == fam }) {
			rest = append(rest, fam)
		}
	}
	return got, rest, nil
}

// fitsRequest: hd may serve req, whose families are wanted, next to the
// holdings chosen already: it is in req's network, of a wanted family
// chosen has none of, and in one of the family's named subnets when req
// names some.
func fitsRequest(hd holding, req ipam.Request, wanted []family.Family, chosen []holding) bool {
	fam := hd.lease.Family
	if hd.lease.Network != req.Network || !slices.Contains(wanted, fam) ||
		slices.ContainsFunc(chosen, func(c holding) bool { return c.lease.Family == fam }) {
		return false
	}
	return len(req.Subnets[fam]) == 0 || slices.Contains(req.Subnets[fam], hd.lease.Subnet)
}

// handOver binds holdings taken out of pool to pod key, the record first
// (one conditional update each: the record must still be kept by pool),
// memory after. A refused update hands the address back to the pool, or to
// the holder its record names, with every later one back to the pool. An
// update whose outcome is unknown leaves the address held for the pod,
// unconfirmed, so nobody else takes it before the next pass reads the
// record back (confirm): a node may have set it up already.
func (r *Reconciler) handOver(ctx context.Context, pool, key string, pod *corev1.Pod, f facts, taken []holding, count int) ([]holding, error) {
	defer r.held.putDown(taken)
	var got []holding
	had := slices.Clone(r.held.get(key)) // a pod being completed holds some already
	giveBack := func(rest []holding, err error) ([]holding, error) {
		for _, back := range rest {
			r.held.add(pool, back)
		}
		r.held.set(key, append(slices.Clone(had), got...))
		return nil, err
	}
	mac := podMAC(f.mac, append(slices.Clone(had), taken...))
	for i, kept := range taken {
		if rec, err := r.Alloc.Lookup(kept.lease.Subnet, kept.lease.Addr); err != nil || rec.Owner != pool {
			return giveBack(taken[i:], fmt.Errorf("pod %s, address %s of %s: %w", key, kept.lease.Addr, pool, errInFlux))
		}
		hd := kept
		hd.podUID, hd.node, hd.pod, hd.phase = string(pod.UID), pod.Spec.NodeName, pod.Name, estuaryv1.IPInstanceBound
		hd.owner, hd.retain, hd.expires, hd.count = f.owner, f.retain, time.Time{}, count
		hd.mac = mac
		err := r.writeBinding(ctx, key, hd, heldBy(pool, estuaryv1.IPInstanceRetained, estuaryv1.IPInstanceReserved))
		if he, ok := asHeldElsewhere(err); ok {
			if gerr := r.giveTo(ctx, pool, kept, he.record); gerr != nil {
				return giveBack(taken[i:], errors.Join(err, gerr))
			}
			return giveBack(taken[i+1:], fmt.Errorf("hand %s kept by %s to pod %s: %w", hd.lease.Addr, pool, key, err))
		}
		if err != nil && nothingStored(err) {
			return giveBack(taken[i:], fmt.Errorf("hand %s kept by %s to pod %s: %w", hd.lease.Addr, pool, key, err))
		}
		if terr := r.Alloc.Transfer(hd.lease.Subnet, hd.lease.Addr, pool, key, ipam.Allocated); terr != nil {
			return giveBack(taken[i+1:], fmt.Errorf("hand %s kept by %s to pod %s in memory: %w", hd.lease.Addr, pool, key, terr))
		}
		if err == nil {
			hd.recorded = time.Now()
		}
		got = append(got, hd)
		r.held.set(key, append(slices.Clone(had), got...))
		if err != nil {
			return giveBack(taken[i+1:], fmt.Errorf("hand %s kept by %s to pod %s: outcome unknown, held for the pod until its record is read back: %w",
				hd.lease.Addr, pool, key, err))
		}
	}
	log.FromContext(ctx).V(1).Info("took addresses kept by the workload", "pod", key, "workload", pool, "addresses", addrs(got))
	return got, nil
}

// requestFamilies lists the families req asks for, IPv4 first.
func requestFamilies(req ipam.Request) []family.Family {
	if len(req.Families) > 0 {
		return req.Families
	}
	var out []family.Family
	for _, f := range []family.Family{family.IPv4, family.IPv6} {
		if len(req.Subnets[f]) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// narrow limits req to the families fams.
func narrow(req ipam.Request, fams []family.Family) ipam.Request {
	out := req
	out.Families = fams
	out.Subnets = nil
	for f, names := range req.Subnets {
		if slices.Contains(fams, f) {
			if out.Subnets == nil {
				out.Subnets = map[family.Family][]string{}
			}
			out.Subnets[f] = names
		}
	}
	return out
}
