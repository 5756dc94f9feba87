package podipam

// An address's history: who held an address and when, after its IPInstance
// is gone.
//
// Where it lives. One cluster-scoped IPHistory per address, named after
// the address as its IPInstance is (estuaryv1.InstanceName, IPv6 colons as
// dashes), holding a bounded list of entries, oldest first. One object per
// address keeps each write small, never contended by two addresses, and
// readable with one GET by `kubectl estuary get ip ADDR --history`. Batched
// objects (one per subnet and time window) would save API writes under a
// burst but put every move of a subnet on one hot object, whose conflicts
// and size grow with the subnet; instead the writer coalesces the moves of
// one address queued together into one write, so a burst of moves costs
// one write per address, and a pod's allocation costs one history write
// after its one IPInstance write (docs/benchmarks.md measures it).
//
// How entries are produced. Every IPInstance write goes through the
// ledger's recordStore; historyStore wraps it and, after a write the API
// server accepted, queues exactly one entry when the write changed who
// holds the address: a create is Allocated, a delete Released, an update
// to Retained or Reserved Kept, an update to Bound by another pod than
// before HandedOver. Updates that do not change the holder (a count, a
// TTL) record nothing. An entry's ID is the record's UID, the
// resourceVersion the write produced (for a delete, the one it deleted)
// and the move, so an entry queued twice, or written again by a retry or
// after a restart, is stored once.
//
// Never a second source of truth. Allocation never reads an IPHistory.
// Queueing never blocks: the writer (a leader-only runnable) writes in
// the background, retries a failed write with backoff, counts each
// failure in estuary_ipam_address_history_write_failures_total and logs
// it; an allocation never waits for it nor fails with it. Entries queued
// but not yet written when the leader stops are lost; everything written
// survives restarts and leader changes, and the next leader appends to it.
//
// Bounds. On each write the entries older than MaxAge go and only the
// newest MaxEntries stay; a sweep every SweepInterval does the same for
// addresses no longer written, and deletes an IPHistory left empty.

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// HistoryOptions configure the addresses' history.
type HistoryOptions struct {
	// Off stops recording history (the manager's
	// --address-history=false); what is recorded stays until its
	// IPHistory is deleted.
	Off bool
	// MaxEntries is the most entries kept per address (default 50).
	MaxEntries int
	// MaxAge is how long an entry is kept (default 720h).
	MaxAge time.Duration
	// SweepInterval is how often every history is trimmed (default
	// MaxAge/24, at most an hour).
	SweepInterval time.Duration
}

// Defaults of HistoryOptions.
const (
	DefaultHistoryMaxEntries = 50
	DefaultHistoryMaxAge     = 30 * 24 * time.Hour
	maxHistoryEntries        = 1000 // the CRD's maxItems
)

func (o HistoryOptions) withDefaults() HistoryOptions {
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultHistoryMaxEntries
	}
	o.MaxEntries = min(o.MaxEntries, maxHistoryEntries)
	if o.MaxAge <= 0 {
		o.MaxAge = DefaultHistoryMaxAge
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = min(o.MaxAge/24, time.Hour)
	}
	return o
}

// historySink takes the entries of accepted record writes; it never
// blocks.
type historySink interface {
	add(e estuaryv1.AddressHistoryEntry, addr string)
}

// historyStore is a recordStore that queues one history entry for every
// accepted write that changes an address's holder.
type historyStore struct {
	recordStore
	sink historySink
	now  func() time.Time
}

func (s historyStore) Create(ctx context.Context, ipi *estuaryv1.IPInstance) error {
	err := s.recordStore.Create(ctx, ipi)
	if err == nil {
		s.emit(nil, ipi, estuaryv1.MoveAllocated)
	}
	return err
}

func (s historyStore) Update(ctx context.Context, ipi *estuaryv1.IPInstance) error {
	prev, gerr := s.Get(ctx, ipi.Name) // the cache: no API read
	if gerr != nil {
		prev = nil
	}
	err := s.recordStore.Update(ctx, ipi)
	if err == nil {
		if mv, ok := moveOf(prev, ipi); ok {
			s.emit(prev, ipi, mv)
		}
	}
	return err
}

func (s historyStore) Delete(ctx context.Context, ipi *estuaryv1.IPInstance) error {
	err := s.recordStore.Delete(ctx, ipi)
	if err == nil {
		s.emit(nil, ipi, estuaryv1.MoveReleased)
	}
	return err
}

// moveOf is the move an update from prev (nil: unknown) to next records,
// if it changed the holder.
func moveOf(prev, next *estuaryv1.IPInstance) (estuaryv1.AddressMove, bool) {
	switch next.Status.Phase {
	case estuaryv1.IPInstanceBound:
		if prev != nil && prev.Status.Phase == estuaryv1.IPInstanceBound && prev.Spec.Binding.PodUID == next.Spec.Binding.PodUID {
			return "", false
		}
		return estuaryv1.MoveHandedOver, true
	case estuaryv1.IPInstanceRetained, estuaryv1.IPInstanceReserved:
		if prev != nil && prev.Status.Phase == next.Status.Phase && recordKey(prev) == recordKey(next) {
			return "", false
		}
		return estuaryv1.MoveKept, true
	}
	return "", false
}

// emit queues the entry of a write of ipi (prev: the record before it).
func (s historyStore) emit(prev, ipi *estuaryv1.IPInstance, mv estuaryv1.AddressMove) {
	b := ipi.Spec.Binding
	e := estuaryv1.AddressHistoryEntry{
		ID:   string(ipi.UID) + "/" + ipi.ResourceVersion + "/" + string(mv),
		Time: metav1.NewTime(s.now().UTC().Truncate(time.Second)), Move: mv,
		Namespace: b.Namespace, Pod: b.PodName, PodUID: b.PodUID, OwnerKind: b.Owner.Kind, OwnerName: b.Owner.Name,
		Node: b.NodeName, MAC: ipi.Spec.Address.MAC, Subnet: ipi.Spec.Subnet,
	}
	if mv == estuaryv1.MoveKept || mv == estuaryv1.MoveReleased {
		e.PodUID = ""
		if e.Node == "" && prev != nil {
			e.Node = prev.Spec.Binding.NodeName // where the pod that held it last ran
		}
	}
	s.sink.add(e, bareAddr(ipi))
}

// bareAddr is the bare address of a record.
func bareAddr(ipi *estuaryv1.IPInstance) string {
	ip := ipi.Spec.Address.IP
	for i := range len(ip) {
		if ip[i] == '/' {
			return ip[:i]
		}
	}
	return ip
}

// historyName is the name of addr's IPHistory: its IPInstance's name.
func historyName(addr string) (string, error) {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return "", fmt.Errorf("address history of %q: %w", addr, err)
	}
	return estuaryv1.InstanceName(a), nil
}
