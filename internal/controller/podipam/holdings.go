package podipam

import (
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/workload"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// holding is one address held for a pod name, as this manager knows it. It
// mirrors one IPInstance.
type holding struct {
	lease  ipam.Lease
	name   string // IPInstance name
	podUID string // empty while retained
	node   string
	phase  estuaryv1.IPInstancePhase
	set    *setRef // the owning StatefulSet, nil for other pods
	// count is how many addresses the pod has in all (2 for dual stack),
	// recorded on every one of its IPInstances.
	count int
	// recorded is when this manager last saw the record created or
	// confirmed; zero when it never did (rebuilt or adopted from a list).
	recorded time.Time
	// pod is the pod the record names: the one using the address, or, once
	// it is kept for its workload, the one that used it last.
	pod string
	// owner is the pod's top-level owner (package workload).
	owner workload.Ref
	// retain is the pod's retention: nil when its addresses go with it
	// (a StatefulSet's pod then follows the StatefulSet's rule).
	retain *retention
	// reserved: an administrator reserved the address for owner.
	reserved bool
	// expires is when a Retained address is released; zero: never.
	expires time.Time
	// mac is the pod interface's fixed MAC, or "".
	mac string
}

// retention is how long a pod's addresses are kept for its workload once it
// is gone; ttl nil means until released by hand.
type retention struct {
	ttl *time.Duration
}

// until is when an address kept from now on expires; zero: never.
func (rt *retention) until(now time.Time) time.Time {
	if rt == nil || rt.ttl == nil {
		return time.Time{}
	}
	return now.Add(*rt.ttl)
}

// setRef identifies the StatefulSet (or Advanced StatefulSet) that owns a
// pod's addresses and the pod's ordinal in it.
type setRef struct {
	kind    string // workload.KindStatefulSet or workload.KindKruiseStatefulSet
	name    string
	uid     string
	ordinal int32
}

// holdings is the in-memory truth of who holds what: the addresses held per
// key (keys.go), shared by the pod and pool controllers. It is
// written only by reconciles, one per key at a time, so it needs a lock only
// for the index itself.
type holdings struct {
	mu    sync.Mutex
	byKey map[string][]holding
	// inHand counts, per record name, the takes out of a workload's pool
	// whose write is still in flight (a hand-over to a pod, a release):
	// the holding is in nobody's list meanwhile, and the pool's own
	// reconcile must not adopt it back from a cache that still shows it
	// kept.
	inHand map[string]int
}

func newHoldings() *holdings {
	return &holdings{byKey: map[string][]holding{}, inHand: map[string]int{}}
}

func (h *holdings) get(key string) []holding {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]holding(nil), h.byKey[key]...)
}

func (h *holdings) set(key string, hs []holding) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(hs) == 0 {
		delete(h.byKey, key)
		return
	}
	h.byKey[key] = append([]holding(nil), hs...)
}

func (h *holdings) add(key string, hd holding) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.byKey[key] = append(h.byKey[key], hd)
}

// holds: the record named name is held for key.
func (h *holdings) holds(key, name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return holdsName(h.byKey[key], name)
}

// keys lists every owner key that holds an address.
func (h *holdings) keys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.byKey))
	for key := range h.byKey {
		out = append(out, key)
	}
	return out
}

// ofSet lists the owner keys holding addresses for a StatefulSet of kind.
func (h *holdings) ofSet(kind, namespace, name string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var keys []string
	for key, hs := range h.byKey {
		for _, hd := range hs {
			if hd.set != nil && hd.set.kind == kind && hd.set.name == name && keyNamespace(key) == namespace {
				keys = append(keys, key)
				break
			}
		}
	}
	sort.Strings(keys)
	return keys
}

// take removes from key's holdings, and returns, the ones pick chooses;
// pick sees the holdings in order and what it has chosen so far. The
// removal is atomic, so two reconciles never take the same holding.
func (h *holdings) take(key string, pick func(hd holding, chosen []holding) bool) []holding {
	h.mu.Lock()
	defer h.mu.Unlock()
	var chosen, kept []holding
	for _, hd := range h.byKey[key] {
		if pick(hd, chosen) {
			chosen = append(chosen, hd)
		} else {
			kept = append(kept, hd)
		}
	}
	if len(kept) == 0 {
		delete(h.byKey, key)
	} else {
		h.byKey[key] = kept
	}
	return chosen
}

// takeInHand is take for a write that moves the holdings out of a
// workload's pool: they stay marked in hand until putDown.
func (h *holdings) takeInHand(key string, pick func(hd holding, chosen []holding) bool) []holding {
	taken := h.take(key, pick)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hd := range taken {
		h.inHand[hd.name]++
	}
	return taken
}

// putDown ends the marks takeInHand set, once the holdings are where the
// write left them (a pod's list, the pool's again, or nowhere).
func (h *holdings) putDown(hs []holding) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hd := range hs {
		if h.inHand[hd.name]--; h.inHand[hd.name] <= 0 {
			delete(h.inHand, hd.name)
		}
	}
}

// adoptInto adds hd to key's list unless a write has it in hand or the
// list holds its record already; it reports whether it added it.
func (h *holdings) adoptInto(key string, hd holding) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inHand[hd.name] > 0 || holdsName(h.byKey[key], hd.name) {
		return false
	}
	h.byKey[key] = append(h.byKey[key], hd)
	return true
}

// isInHand: a write has the record name in hand.
func (h *holdings) isInHand(name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.inHand[name] > 0
}

// find returns the holding of record name under key.
func (h *holdings) find(key, name string) (holding, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hd := range h.byKey[key] {
		if hd.name == name {
			return hd, true
		}
	}
	return holding{}, false
}

// macHolder returns the key of a holding other than except's with the
// given MAC, or "".
func (h *holdings) macHolder(mac, except string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, hs := range h.byKey {
		if key == except {
			continue
		}
		for _, hd := range hs {
			if hd.mac == mac {
				return key
			}
		}
	}
	return ""
}

// fromInstances indexes IPInstances by owner key.
func fromInstances(items []estuaryv1.IPInstance) map[string][]holding {
	out := map[string][]holding{}
	for i := range items {
		ipi := &items[i]
		rec, err := record(ipi)
		if err != nil {
			continue
		}
		hd := holding{
			lease:  ipam.Lease{Subnet: ipi.Spec.Subnet, Network: ipi.Spec.Network, Addr: rec.Addr, Family: family.Of(rec.Addr)},
			name:   ipi.Name,
			podUID: ipi.Spec.Binding.PodUID,
			node:   ipi.Spec.Binding.NodeName,
			phase:  ipi.Status.Phase,
			pod:    ipi.Spec.Binding.PodName,
			owner: workload.Ref{Namespace: ipi.Spec.Binding.Namespace, Kind: ipi.Spec.Binding.Owner.Kind,
				Name: ipi.Spec.Binding.Owner.Name, UID: ipi.Spec.Binding.Owner.UID},
			reserved: ipi.Spec.Reserved,
			mac:      ipi.Spec.Address.MAC,
		}
		if rt := ipi.Spec.Retention; rt != nil {
			hd.retain = &retention{}
			if rt.TTL != nil {
				hd.retain.ttl = &rt.TTL.Duration
			}
		}
		if ipi.Status.ExpiresAt != nil {
			hd.expires = ipi.Status.ExpiresAt.Time
		}
		if o := ipi.Spec.Binding.Owner; workload.IsStateful(o.Kind) && ipi.Spec.Binding.StatefulOrdinal != nil {
			hd.set = &setRef{kind: o.Kind, name: o.Name, uid: o.UID, ordinal: *ipi.Spec.Binding.StatefulOrdinal}
		}
		hd.count, _ = strconv.Atoi(ipi.Annotations[estuaryv1.AnnotationAddresses])
		key := rec.Owner
		out[key] = append(out[key], hd)
	}
	for key, hs := range out {
		fams := map[family.Family]bool{}
		for _, hd := range hs {
			fams[hd.lease.Family] = true
		}
		for i := range hs {
			if hs[i].count < 1 {
				hs[i].count = len(fams) // a record written before every binding carried the count
			}
		}
		out[key] = hs
	}
	return out
}

// holdsLease: the lease l is held for key.
func (h *holdings) holdsLease(key string, l ipam.Lease) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.ContainsFunc(h.byKey[key], func(hd holding) bool { return hd.lease.Subnet == l.Subnet && hd.lease.Addr == l.Addr })
}

// boundOf lists the pod keys other than except holding Bound addresses of
// workload owner, oldest holding first.
func (h *holdings) boundOf(owner workload.Ref, except string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var keys []string
	for key, hs := range h.byKey {
		if key == except || isPool(key) {
			continue
		}
		if slices.ContainsFunc(hs, func(hd holding) bool { return hd.phase == estuaryv1.IPInstanceBound && hd.owner.Same(owner) }) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}

func holdsName(hs []holding, name string) bool {
	for _, hd := range hs {
		if hd.name == name {
			return true
		}
	}
	return false
}

// pendingAdoptions are records the audit found that this manager did not
// hold, waiting for their holder's next reconcile (pod or pool).
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

// sameSet: the held addresses belong to the StatefulSet (by kind and name)
// that owns the pod.
func sameSet(held []holding, set *setRef) bool {
	return held[0].set != nil && held[0].set.kind == set.kind && held[0].set.name == set.name
}
