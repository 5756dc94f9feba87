package podipam

// Fixed addresses: a pod that names its addresses (ip-address, or an entry
// of ip-pool) gets exactly those or waits. Each address it asks for is in
// one of four states, read from the allocator:
//
//   - free: assigned to the pod and recorded (one create);
//   - kept or reserved for the pod's own workload: handed over (one update);
//   - held by another pod of the same workload (a slow pod stop, a rolling
//     update with surge): the pod waits, with a WaitingForAddress event
//     naming the holder, and is queued again the moment the holder lets go;
//   - held by another workload: refused, with an event naming the holder.
//
// A StatefulSet's pod of ordinal i takes entry i of ip-pool and nothing
// else; any other pod takes the first entry all of whose addresses it can
// have. The MAC follows the same rules: mac-address, or the mac-pool entry
// of the pod's ordinal or of the ip-pool entry it took, or else the first
// mac-pool entry nobody holds.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// ReasonWaitingForAddress is the event reason when the address a pod asks
// for is still held by another pod of its workload.
const ReasonWaitingForAddress = "WaitingForAddress"

// waitRetry is how soon a waiting pod is looked at again if no release
// wakes it first.
const waitRetry = 10 * time.Second

// fixedClaims serves the pods that name their addresses.
type fixedClaims struct {
	alloc  Allocator
	topo   *Topology
	held   *holdings
	queue  *queues
	events EventRecorder
	ledger *ledger
}

// entryState is what stands between a pod and one fixed address.
type entryState struct {
	free, ours []netip.Addr
	busy       []string // pods of the same workload holding an address
	taken      []string // other workloads holding an address
}

// inspect reads the state of every address of entry for pod key of f.
func (c *fixedClaims) inspect(key string, f facts, entry []netip.Addr) entryState {
	var st entryState
	pool := f.owner.Key()
	for _, a := range entry {
		rec, err := c.alloc.Lookup(f.places[a], a)
		switch {
		case errors.Is(err, ipam.ErrNotAllocated):
			st.free = append(st.free, a)
		case err != nil:
			st.taken = append(st.taken, fmt.Sprintf("%s (%v)", a, err))
		case rec.Owner == pool || rec.Owner == key:
			st.ours = append(st.ours, a)
		case !isPool(rec.Owner):
			if hd, ok := c.held.find(rec.Owner, estuaryv1.InstanceName(a)); ok && hd.owner.Same(f.owner) {
				st.busy = append(st.busy, fmt.Sprintf("%s (pod %s)", a, rec.Owner))
			} else {
				st.taken = append(st.taken, fmt.Sprintf("%s (pod %s)", a, rec.Owner))
			}
		default:
			st.taken = append(st.taken, fmt.Sprintf("%s (kept for %s)", a, rec.Owner))
		}
	}
	return st
}

// fixedEntries lists the entries pod may take, with their indexes in the
// pool (0 for ip-address).
func fixedEntries(f facts) ([][]netip.Addr, []int, error) {
	if len(f.fixed.Addresses) > 0 {
		return [][]netip.Addr{f.fixed.Addresses}, []int{0}, nil
	}
	if f.set != nil {
		i := int(f.set.ordinal)
		if i >= len(f.fixed.Pool) {
			return nil, nil, f.fixed.Deny("has %d entries, so pod ordinal %d of StatefulSet %s has none", len(f.fixed.Pool), i, f.set.name)
		}
		return [][]netip.Addr{f.fixed.Pool[i]}, []int{i}, nil
	}
	idx := make([]int, len(f.fixed.Pool))
	for i := range idx {
		idx[i] = i
	}
	return f.fixed.Pool, idx, nil
}

// allocateFixed gives pod the addresses it names, or makes it wait, or
// refuses it; families its entry does not cover are allocated as usual.
func (c *fixedClaims) allocateFixed(ctx context.Context, key string, pod *corev1.Pod, f facts, req ipam.Request) (ctrl.Result, error) {
	entries, idx, err := fixedEntries(f)
	if err != nil {
		return ctrl.Result{}, &refusal{reason: ReasonAllocationFailed, err: err}
	}
	var busy, taken []string
	for i, entry := range entries {
		st := c.inspect(key, f, entry)
		if len(st.busy) > 0 || len(st.taken) > 0 {
			busy, taken = append(busy, st.busy...), append(taken, st.taken...)
			continue
		}
		if f.mac, err = c.macFor(key, f, idx[i]); err != nil {
			return ctrl.Result{}, &refusal{reason: ReasonAllocationFailed, err: err}
		}
		return c.claim(ctx, key, pod, f, req, st)
	}
	if len(busy) > 0 {
		for _, e := range entries {
			for _, a := range e {
				c.queue.waitFor(estuaryv1.InstanceName(a), types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
			}
		}
		c.events.Eventf(pod, nil, corev1.EventTypeWarning, ReasonWaitingForAddress, "Allocate",
			"pod %s waits for %s, held by another pod of %s; it gets the address as soon as that pod is gone", key, strings.Join(busy, ", "), f.owner)
		return ctrl.Result{RequeueAfter: waitRetry}, nil
	}
	return ctrl.Result{}, &refusal{reason: ReasonAllocationFailed,
		err: f.fixed.Deny("asks for addresses held by other workloads: %s", strings.Join(taken, ", "))}
}

// claim takes the addresses of an entry whose state st is all free or the
// workload's own: free ones are assigned first (in memory only, so a lost
// race changes nothing), then own ones handed over, and the families the
// entry lacks allocated alongside; all are recorded together.
func (c *fixedClaims) claim(ctx context.Context, key string, pod *corev1.Pod, f facts, req ipam.Request, st entryState) (ctrl.Result, error) {
	wanted := requestFamilies(req)
	for _, a := range append(st.free, st.ours...) {
		if fam := family.Of(a); !containsFam(wanted, fam) {
			wanted = append(wanted, fam)
		}
	}
	leases, err := c.assignNamed(ctx, key, f, st.free)
	if errors.Is(err, ipam.ErrInUse) {
		// Taken since inspect: look again shortly, nothing was written.
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	prior, err := c.takeKept(ctx, key, pod, f, st.ours, len(wanted))
	if err != nil {
		c.ledger.abandon(ctx, key, leases, nil)
		if errors.Is(err, errInFlux) {
			return ctrl.Result{RequeueAfter: conflictRetry}, nil
		}
		return ctrl.Result{}, err
	}
	var rest []family.Family
	for _, fam := range wanted {
		if !containsFam(familiesOfHoldings(prior), fam) && !containsFam(familiesOfLeases(leases), fam) {
			rest = append(rest, fam)
		}
	}
	if len(rest) > 0 {
		more, err := c.alloc.Allocate(narrow(req, rest))
		if err != nil {
			c.ledger.abandon(ctx, key, leases, nil)
			return ctrl.Result{}, fmt.Errorf("allocate the other families of pod %s: %w", key, err)
		}
		leases = append(leases, more...)
	}
	return c.ledger.recordLeases(ctx, key, pod, leases, len(wanted), prior, f)
}

// errInFlux: an address of the workload's is between the allocator and the
// pool's list (being adopted or handed back); look again shortly.
var errInFlux = errors.New("a kept address is being adopted or handed back")

// takeKept hands the addresses ours, kept in the pool of f's workload, over
// to pod key, which then holds count addresses; all or none: it fails with
// errInFlux, changing nothing, when one of them is not in the pool's list.
// It returns the holdings handed over, recorded already.
func (c *fixedClaims) takeKept(ctx context.Context, key string, pod *corev1.Pod, f facts, ours []netip.Addr, count int) ([]holding, error) {
	if len(ours) == 0 {
		return nil, nil
	}
	pool := f.owner.Key()
	names := map[string]bool{}
	for _, a := range ours {
		names[estuaryv1.InstanceName(a)] = true
	}
	taken := c.held.takeInHand(pool, func(hd holding, _ []holding) bool { return names[hd.name] })
	if len(taken) != len(ours) {
		for _, hd := range taken {
			c.held.add(pool, hd)
		}
		c.held.putDown(taken)
		return nil, fmt.Errorf("pod %s, addresses %v of %s: %w", key, ours, pool, errInFlux)
	}
	return c.ledger.handOver(ctx, pool, key, pod, f, taken, count)
}

// assignNamed assigns the free named addresses to pod key in the
// allocator, all or none.
func (c *fixedClaims) assignNamed(ctx context.Context, key string, f facts, free []netip.Addr) ([]ipam.Lease, error) {
	var leases []ipam.Lease
	for _, a := range free {
		l, ok := c.topo.leaseIn(f.places[a], a)
		if !ok {
			c.ledger.abandon(ctx, key, leases, nil)
			return nil, fmt.Errorf("fixed address %s of pod %s: subnet %s is not installed", a, key, f.places[a])
		}
		if err := c.alloc.Assign(l.Subnet, a, key); err != nil {
			c.ledger.abandon(ctx, key, leases, nil)
			return nil, fmt.Errorf("fixed address %s of pod %s: %w", a, key, err)
		}
		leases = append(leases, l)
	}
	return leases, nil
}

// completeNamed is completion for a pod with fixed addresses: of the
// families fams it still lacks, those its entry names (the entry holding
// what the pod has) are taken now, free ones assigned and ones its
// workload keeps handed over, so an interrupted claim still ends with the
// named addresses. It returns the new leases, the holdings handed over
// (recorded already) and the families left for ordinary allocation. A
// named address another workload holds is a refusal; one a pod of its own
// workload still holds, an error to retry.
func (c *fixedClaims) completeNamed(ctx context.Context, key string, pod *corev1.Pod, f facts, held []holding, fams []family.Family) ([]ipam.Lease, []holding, []family.Family, error) {
	entry, err := heldEntry(f, held)
	if err != nil {
		return nil, nil, nil, &refusal{reason: ReasonAllocationFailed, err: err}
	}
	var named []netip.Addr
	var rest []family.Family
	for _, fam := range fams {
		if i := slices.IndexFunc(entry, func(a netip.Addr) bool { return family.Of(a) == fam }); i >= 0 {
			named = append(named, entry[i])
		} else {
			rest = append(rest, fam)
		}
	}
	st := c.inspect(key, f, named)
	switch {
	case len(st.taken) > 0:
		return nil, nil, nil, &refusal{reason: ReasonAllocationFailed,
			err: f.fixed.Deny("asks for addresses held by other workloads: %s", strings.Join(st.taken, ", "))}
	case len(st.busy) > 0:
		return nil, nil, nil, fmt.Errorf("pod %s: named addresses %s are still held", key, strings.Join(st.busy, ", "))
	}
	leases, err := c.assignNamed(ctx, key, f, st.free)
	if err != nil {
		return nil, nil, nil, err
	}
	prior, err := c.takeKept(ctx, key, pod, f, st.ours, held[0].count)
	if err != nil {
		c.ledger.abandon(ctx, key, leases, nil)
		return nil, nil, nil, err
	}
	return leases, prior, rest, nil
}

// heldEntry is the entry of f's fixed addresses that holds an address of
// held (the one entry for ip-address or a StatefulSet's ordinal).
func heldEntry(f facts, held []holding) ([]netip.Addr, error) {
	entries, _, err := fixedEntries(f)
	if err != nil {
		return nil, err
	}
	if len(entries) == 1 {
		return entries[0], nil
	}
	for _, e := range entries {
		for _, hd := range held {
			if slices.Contains(e, hd.lease.Addr) {
				return e, nil
			}
		}
	}
	return nil, nil
}

// macFor is the MAC a pod taking entry i of its ip-pool gets.
func (c *fixedClaims) macFor(key string, f facts, i int) (string, error) {
	pool := f.fixed.MACPool
	switch {
	case f.fixed.MAC != "":
		return f.fixed.MAC, c.macFree(key, f, f.fixed.MAC)
	case len(pool) == 0:
		return "", nil
	case f.set != nil:
		i = int(f.set.ordinal)
	case len(f.fixed.Pool) == 0:
		for _, mac := range pool {
			if c.macFree(key, f, mac) == nil {
				return mac, nil
			}
		}
		return "", f.fixed.DenyMAC("every entry is held by another pod")
	}
	if i >= len(pool) {
		return "", f.fixed.DenyMAC("has %d entries, so entry %d has no MAC", len(pool), i)
	}
	return pool[i], c.macFree(key, f, pool[i])
}

// macFree: no pod but pod key, and no workload but pod's, holds mac.
func (c *fixedClaims) macFree(key string, f facts, mac string) error {
	holder := c.held.macHolder(mac, key)
	if holder == "" || holder == f.owner.Key() {
		return nil
	}
	return f.fixed.DenyMAC("MAC %s is held by %s", mac, holder)
}
