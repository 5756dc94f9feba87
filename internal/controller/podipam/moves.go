package podipam

// Every change of holder other than a new allocation: each writes the
// record first (writeBinding, deleteRecord: records.go), then the
// allocator, then the holdings, so a manager that stops between the two
// rebuilds from the record. A write that finds the record held elsewhere
// lets memory follow the record (giveTo); one whose outcome is unknown
// leaves the address held where it was meant to go, unconfirmed, until a
// later pass reads the record back (complete.go's confirm).
//
// Writes that take holdings out of a workload's pool (handOver,
// releaseTaken) mark them in hand (holdings.takeInHand) until they are
// where the write left them, so the pool controller never adopts them back
// from a cache that still shows them kept.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// release deletes the records and frees the addresses. A record is deleted
// before its address is freed, so an address is never free while recorded;
// a record that another holder took meanwhile is not deleted, and memory
// follows it instead (giveTo).
func (l *ledger) release(ctx context.Context, key string, held []holding) error {
	for i, hd := range held {
		err := l.deleteRecord(ctx, key, hd)
		if he, ok := asHeldElsewhere(err); ok {
			err = l.giveTo(ctx, key, hd, he.record)
		} else if err == nil {
			err = l.alloc.Release(hd.lease.Subnet, hd.lease.Addr, key)
			if err != nil && !errors.Is(err, ipam.ErrNotAllocated) {
				log.FromContext(ctx).Error(err, "release", "pod", key, "address", hd.lease.Addr)
			}
			err = nil
		}
		if err != nil {
			l.held.set(key, held[i:])
			return err
		}
		l.queue.wake(hd.name)
	}
	l.held.set(key, nil)
	log.FromContext(ctx).V(1).Info("released", "pod", key, "addresses", addrs(held))
	return nil
}

// releaseTaken deletes the records of holdings already taken out of key's
// list and frees their addresses; a holding whose record cannot be deleted
// goes back to key.
func (l *ledger) releaseTaken(ctx context.Context, key string, hs []holding) error {
	defer l.held.putDown(hs)
	for i, hd := range hs {
		err := l.deleteRecord(ctx, key, hd)
		if he, ok := asHeldElsewhere(err); ok {
			err = l.giveTo(ctx, key, hd, he.record)
		} else if err == nil {
			if rerr := l.alloc.Release(hd.lease.Subnet, hd.lease.Addr, key); rerr != nil && !errors.Is(rerr, ipam.ErrNotAllocated) {
				log.FromContext(ctx).Error(rerr, "release", "workload", key, "address", hd.lease.Addr)
			}
		}
		if err != nil {
			for _, back := range hs[i:] {
				l.held.add(key, back)
			}
			return err
		}
		l.queue.wake(hd.name)
	}
	return nil
}

// retain keeps the addresses for the pod that will replace this one: the
// records lose their node binding and turn Retained, expiring at until
// (zero: never); then the allocator keeps them. It returns the holdings as
// kept.
func (l *ledger) retain(ctx context.Context, key string, held []holding, until time.Time) ([]holding, error) {
	held = slices.Clone(held)
	for i := range held {
		hd := held[i]
		if hd.phase == estuaryv1.IPInstanceRetained {
			continue
		}
		hd.podUID, hd.node, hd.phase, hd.expires = "", "", estuaryv1.IPInstanceRetained, until
		if err := l.writeBinding(ctx, key, hd, heldBy(key, estuaryv1.IPInstanceBound)); err != nil {
			return nil, l.afterFailedWrite(ctx, key, held[i], err)
		}
		if err := l.alloc.Retain(hd.lease.Subnet, hd.lease.Addr, key); err != nil {
			return nil, fmt.Errorf("retain %s for %s: %w", hd.lease.Addr, key, err)
		}
		held[i] = hd
		l.held.set(key, held)
	}
	return held, nil
}

// rebind hands a StatefulSet pod the addresses held for its name, which
// it has count of in all: each record first, then memory.
func (l *ledger) rebind(ctx context.Context, key string, pod *corev1.Pod, held []holding, count int) error {
	held = slices.Clone(held)
	mac := podMAC("", held)
	for i := range held {
		hd := held[i]
		hd.podUID, hd.node, hd.phase, hd.expires = string(pod.UID), pod.Spec.NodeName, estuaryv1.IPInstanceBound, time.Time{}
		hd.set, hd.mac, hd.count = statefulOwner(pod), mac, count
		if err := l.writeBinding(ctx, key, hd, heldBy(key, estuaryv1.IPInstanceRetained, estuaryv1.IPInstanceBound)); err != nil {
			return l.afterFailedWrite(ctx, key, held[i], err)
		}
		if held[i].phase == estuaryv1.IPInstanceRetained {
			if err := l.alloc.Assign(hd.lease.Subnet, hd.lease.Addr, key); err != nil {
				return fmt.Errorf("reclaim retained %s for %s: %w", hd.lease.Addr, key, err)
			}
		}
		hd.recorded = time.Now()
		held[i] = hd
		l.held.set(key, held)
	}
	log.FromContext(ctx).V(1).Info("rebound", "pod", key, "node", pod.Spec.NodeName, "addresses", addrs(held))
	return nil
}

// toPool hands the addresses held under key to poolKey in the given phase
// (Retained or Reserved), expiring at until (zero: never): each record is
// updated first, then memory.
func (l *ledger) toPool(ctx context.Context, key string, hs []holding, poolKey string, phase estuaryv1.IPInstancePhase, until time.Time) error {
	for _, hd := range hs {
		was := hd
		hd.podUID, hd.node, hd.phase, hd.expires, hd.recorded = "", "", phase, until, time.Now()
		if err := l.writeBinding(ctx, key, hd, heldBy(key, estuaryv1.IPInstanceBound, estuaryv1.IPInstanceRetained)); err != nil {
			return l.afterFailedWrite(ctx, key, was, err)
		}
		l.held.take(key, func(h holding, _ []holding) bool { return h.name == hd.name })
		if err := l.alloc.Transfer(hd.lease.Subnet, hd.lease.Addr, key, poolKey, ipam.Retained); err != nil {
			if !errors.Is(err, ipam.ErrNotAllocated) {
				return fmt.Errorf("keep %s of %s for %s: %w", hd.lease.Addr, key, poolKey, err)
			}
			if err := l.alloc.Assign(hd.lease.Subnet, hd.lease.Addr, poolKey); err != nil {
				return fmt.Errorf("keep %s of %s for %s: %w", hd.lease.Addr, key, poolKey, err)
			}
			_ = l.alloc.Retain(hd.lease.Subnet, hd.lease.Addr, poolKey)
		}
		l.held.add(poolKey, hd)
		l.queue.wake(hd.name)
	}
	l.queue.kick(poolKey)
	log.FromContext(ctx).V(1).Info("kept for the workload", "pod", key, "workload", poolKey, "phase", phase, "addresses", addrs(hs))
	return nil
}

// moveBound moves every address pod from holds to pod key, each record
// first (a conditional update: still Bound to from), memory after. A
// record that is not held by from any more goes where it says (giveTo).
func (l *ledger) moveBound(ctx context.Context, from, key string, pod *corev1.Pod, f facts) error {
	taken := l.held.take(from, func(holding, []holding) bool { return true })
	mac := podMAC(f.mac, taken)
	var got []holding
	for i, was := range taken {
		hd := was
		hd.podUID, hd.node, hd.pod, hd.phase = string(pod.UID), pod.Spec.NodeName, pod.Name, estuaryv1.IPInstanceBound
		hd.owner, hd.retain, hd.expires, hd.mac = f.owner, f.retain, time.Time{}, mac
		err := l.writeBinding(ctx, key, hd, heldBy(from, estuaryv1.IPInstanceBound))
		if err == nil {
			err = l.alloc.Transfer(hd.lease.Subnet, hd.lease.Addr, from, key, ipam.Allocated)
		}
		if err != nil {
			for _, back := range taken[i+1:] {
				l.held.add(from, back)
			}
			l.held.set(key, got)
			if he, ok := asHeldElsewhere(err); ok {
				return errors.Join(err, l.giveTo(ctx, from, was, he.record))
			}
			l.held.add(from, was)
			return fmt.Errorf("move %s of %s from pod %s to pod %s: %w", hd.lease.Addr, f.owner, from, key, err)
		}
		hd.recorded = time.Now()
		got = append(got, hd)
		l.held.set(key, got)
	}
	log.FromContext(ctx).Info("virtual machine's addresses moved to its newer pod", "workload", f.owner.Key(), "from", from, "to", key, "addresses", addrs(got))
	return nil
}

// handOver binds holdings taken out of pool to pod key, the record first
// (one conditional update each: the record must still be kept by pool),
// memory after. A refused update hands the address back to the pool, or to
// the holder its record names, with every later one back to the pool. An
// update whose outcome is unknown leaves the address held for the pod,
// unconfirmed, so nobody else takes it before the next pass reads the
// record back (confirm): a node may have set it up already.
func (l *ledger) handOver(ctx context.Context, pool, key string, pod *corev1.Pod, f facts, taken []holding, count int) ([]holding, error) {
	defer l.held.putDown(taken)
	var got []holding
	had := slices.Clone(l.held.get(key)) // a pod being completed holds some already
	giveBack := func(rest []holding, err error) ([]holding, error) {
		for _, back := range rest {
			l.held.add(pool, back)
		}
		l.held.set(key, append(slices.Clone(had), got...))
		return nil, err
	}
	mac := podMAC(f.mac, append(slices.Clone(had), taken...))
	for i, kept := range taken {
		if rec, err := l.alloc.Lookup(kept.lease.Subnet, kept.lease.Addr); err != nil || rec.Owner != pool {
			return giveBack(taken[i:], fmt.Errorf("pod %s, address %s of %s: %w", key, kept.lease.Addr, pool, errInFlux))
		}
		hd := kept
		hd.podUID, hd.node, hd.pod, hd.phase = string(pod.UID), pod.Spec.NodeName, pod.Name, estuaryv1.IPInstanceBound
		hd.owner, hd.retain, hd.expires, hd.count = f.owner, f.retain, time.Time{}, count
		hd.mac = mac
		err := l.writeBinding(ctx, key, hd, heldBy(pool, estuaryv1.IPInstanceRetained, estuaryv1.IPInstanceReserved))
		if he, ok := asHeldElsewhere(err); ok {
			if gerr := l.giveTo(ctx, pool, kept, he.record); gerr != nil {
				return giveBack(taken[i:], errors.Join(err, gerr))
			}
			return giveBack(taken[i+1:], fmt.Errorf("hand %s kept by %s to pod %s: %w", hd.lease.Addr, pool, key, err))
		}
		if err != nil && nothingStored(err) {
			return giveBack(taken[i:], fmt.Errorf("hand %s kept by %s to pod %s: %w", hd.lease.Addr, pool, key, err))
		}
		if terr := l.alloc.Transfer(hd.lease.Subnet, hd.lease.Addr, pool, key, ipam.Allocated); terr != nil {
			return giveBack(taken[i+1:], fmt.Errorf("hand %s kept by %s to pod %s in memory: %w", hd.lease.Addr, pool, key, terr))
		}
		if err == nil {
			hd.recorded = time.Now()
		}
		got = append(got, hd)
		l.held.set(key, append(slices.Clone(had), got...))
		if err != nil {
			return giveBack(taken[i+1:], fmt.Errorf("hand %s kept by %s to pod %s: outcome unknown, held for the pod until its record is read back: %w",
				hd.lease.Addr, pool, key, err))
		}
	}
	log.FromContext(ctx).V(1).Info("took addresses kept by the workload", "pod", key, "workload", pool, "addresses", addrs(got))
	return got, nil
}

// giveTo hands an address held in memory under key to the holder its
// record names: the allocator moves it in one step, and the holder's next
// reconcile adopts the record.
func (l *ledger) giveTo(ctx context.Context, key string, hd holding, other *estuaryv1.IPInstance) error {
	rec, err := record(other)
	if err != nil {
		return err
	}
	if rec.Owner != key {
		err = l.alloc.Transfer(rec.Subnet, rec.Addr, key, rec.Owner, rec.State)
		if errors.Is(err, ipam.ErrNotAllocated) {
			if err = l.alloc.Assign(rec.Subnet, rec.Addr, rec.Owner); err == nil && rec.State == ipam.Retained {
				err = l.alloc.Retain(rec.Subnet, rec.Addr, rec.Owner)
			}
		}
		if err != nil && !errors.Is(err, ipam.ErrInUse) {
			return fmt.Errorf("hand %s of %s to %s, which its record names: %w", hd.lease.Addr, key, rec.Owner, err)
		}
	}
	for _, h := range fromInstances([]estuaryv1.IPInstance{*other})[rec.Owner] {
		l.pending.add(rec.Owner, h)
	}
	l.queue.kick(rec.Owner)
	if pod, ok := podOf(key); ok {
		l.events.Eventf(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}, other, corev1.EventTypeWarning, "AddressConflict", "Allocate",
			"address %s is recorded for %s; %s no longer holds it", hd.lease.Addr, rec.Owner, key)
	}
	log.FromContext(ctx).Info("address recorded for another holder; handed to it", "from", key, "address", hd.lease.Addr, "holder", rec.Owner)
	return nil
}

// afterFailedWrite settles memory after a write of hd's record, held
// under key, failed: a record held elsewhere takes the address with it
// (giveTo); otherwise memory stays as it was, and the next pass reads the
// record again. It returns err.
func (l *ledger) afterFailedWrite(ctx context.Context, key string, hd holding, err error) error {
	if he, ok := asHeldElsewhere(err); ok {
		l.held.take(key, func(h holding, _ []holding) bool { return h.name == hd.name })
		if gerr := l.giveTo(ctx, key, hd, he.record); gerr != nil {
			l.held.add(key, hd)
			return errors.Join(err, gerr)
		}
	}
	return err
}
