package ipam

// Design of the per-subnet state.
//
// Offsets. Every address is stored as its uint64 offset from the prefix's base
// address. IPv6 prefixes are restricted to /64 or longer so that any offset fits in
// 64 bits; IPv4 offsets fit trivially. Working on integers keeps the hot path free
// of netip conversions except at the API boundary, and makes ranges, counts and
// bitmap indexes plain arithmetic. Offset 0 (the network address, for IPv6 the
// subnet-router anycast) is never allocatable, so a /64 holds at most 2^64-1
// allocatable addresses and every count fits in a uint64.
//
// Sparse two-level bitmap (bitmap.go). Held offsets are bits in 512-bit chunks
// kept in a map keyed by offset>>9. A chunk exists only while one of its
// addresses is held, so memory follows the number of addresses in use, never the
// size of the subnet: an empty /8 or /64 costs a few hundred bytes. An absent chunk
// means "all free", so a search stops at once; a full chunk is skipped in one step,
// and full chunks are also marked in a second-level map (512 chunks per entry) so
// a run of 2^18 held addresses is skipped in one step too: a nearly full /8 is
// searched with 64 second-level lookups. The chunk last written is cached
// (hot) so the common case of next-fit moving through one chunk does no map
// lookup; an emptied chunk is deleted only once another chunk becomes hot, and
// one zeroed chunk is kept as a spare, so allocate/release churn allocates
// nothing. 512 bits (72 bytes with the count) rather than 1024 halves the cost of
// an isolated address, the worst case when addresses are assigned at random
// across a /64, for one more map lookup per 512 addresses scanned.
//
// Range lists (ranges.go). Addresses that are never allocatable (excluded ranges,
// the gateway, the network and broadcast addresses) and reserved ranges are not
// expanded into bits: they are sorted, merged span lists, and next-fit jumps over
// them with a binary search. An excluded range of 2^40 addresses is one element.
// Counts (Total, Reserved) are computed from the lists when the configuration
// changes, not by walking the bits.
//
// Owners. Who holds an offset, and whether it is allocated or retained, is a map
// from offset to entry. The entry also caches the offset's class under the current
// configuration (normal, reserved, blocked), so statistics are counters kept up to
// date in O(1) and only a configuration change walks the entries.
//
// Cursor. Next-fit searches from the last allocated offset + 1 to End, then wraps
// to Start. A released address is therefore reused only after the whole window
// has been searched past it, which gives a released address a cooldown for free.
//
// Locking. Each subnet has its own mutex guarding everything below. The
// Allocator's index of subnets and networks is immutable and replaced
// copy-on-write behind an atomic pointer, so allocating takes exactly one subnet
// lock at a time and no allocator-wide lock: allocations in different subnets
// never contend, and a network-wide request locks its candidate subnets one after
// the other (its rollback too). Only adding, updating or removing a subnet and
// Rebuild take the allocator's writer mutex; Rebuild is the one place that holds
// several subnet locks, taken in name order, to install the new state atomically.
// The layout pointer is written only while holding both the writer mutex and the
// subnet mutex, so either one is enough to read it.

import (
	"fmt"
	"net/netip"
	"sync"

	"github.com/estuary-cni/estuary/pkg/family"
)

// State is the state of a held address.
type State uint8

// The states of a held address.
const (
	Allocated State = iota + 1 // in use by its owner
	Retained                   // kept for its owner, not free
)

// String returns "Allocated", "Retained" or "State(n)".
func (s State) String() string {
	switch s {
	case Allocated:
		return "Allocated"
	case Retained:
		return "Retained"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// entry is what the subnet knows about a held offset.
type entry struct {
	owner string
	state State
	class uint8
}

// holdings is the allocation state of a subnet: replaced as a whole by Rebuild.
type holdings struct {
	bits     bitmap
	owners   map[uint64]entry
	peak     int    // largest len(owners) since owners was last rebuilt
	retained uint64 // entries in state Retained
	stranded uint64 // entries of class blocked
	resUsed  uint64 // entries of class reserved
}

func newHoldings(sizeHint int) holdings {
	return holdings{bits: newBitmap(sizeHint / chunkBits), owners: make(map[uint64]entry, sizeHint)}
}

func (h *holdings) add(off uint64, e entry) {
	h.bits.set(off)
	h.owners[off] = e
	h.peak = max(h.peak, len(h.owners))
	h.count(e, 1)
}

func (h *holdings) remove(off uint64, e entry) {
	h.bits.clear(off)
	delete(h.owners, off)
	h.count(e, ^uint64(0))
	if shrinkDue(len(h.owners), h.peak) {
		h.owners = copyMap(h.owners)
		h.peak = len(h.owners)
	}
}

// Go maps never shrink. After a peak, a map is copied into a right-sized one once
// it has lost 7/8 of its peak size, so memory follows current use; the copy costs
// at most 1/7 of the deletions that led to it.
const shrinkMin = 4096

func shrinkDue(n, peak int) bool { return peak >= shrinkMin && n < peak/8 }

func copyMap[K comparable, V any](m map[K]V) map[K]V {
	c := make(map[K]V, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}

// count adds delta (1 or -1 as uint64) to the counters e contributes to.
func (h *holdings) count(e entry, delta uint64) {
	if e.state == Retained {
		h.retained += delta
	}
	switch e.class {
	case classBlocked:
		h.stranded += delta
	case classReserved:
		h.resUsed += delta
	}
}

// subnet is one subnet's configuration and allocation state.
type subnet struct {
	name   string
	prefix netip.Prefix
	family family.Family

	mu      sync.Mutex
	lay     *layout
	h       holdings
	cursor  uint64 // last offset handed out by next-fit
	removed bool   // set by RemoveSubnet; the subnet refuses all operations
}

func newSubnet(l *layout) *subnet {
	return &subnet{
		name:   l.cfg.Name,
		prefix: l.cfg.Prefix,
		family: family.Of(l.cfg.Prefix.Addr()),
		lay:    l,
		h:      newHoldings(0),
		cursor: l.end, // the first search starts at Start
	}
}

// lockLive locks s and fails if it has been removed. On success the caller must
// unlock.
func (s *subnet) lockLive() error {
	s.mu.Lock()
	if s.removed {
		s.mu.Unlock()
		return unknownSubnet(s.name)
	}
	return nil
}

// nextFit returns the next free normal offset after the cursor, wrapping to start.
func (s *subnet) nextFit() (uint64, bool) {
	l := s.lay
	if s.cursor < l.end {
		if off, ok := s.search(max(s.cursor+1, l.start), l.end); ok {
			return off, true
		}
	}
	return s.search(l.start, min(s.cursor, l.end))
}

// search returns the first offset in [lo, hi] that is neither skipped nor held.
func (s *subnet) search(lo, hi uint64) (uint64, bool) {
	skip := s.lay.skip
	i := skip.find(lo)
	x := lo
	for x <= hi {
		if i < len(skip) && skip[i].lo <= x {
			if skip[i].hi >= hi {
				return 0, false
			}
			x = skip[i].hi + 1
			i++
			continue
		}
		limit := hi
		if i < len(skip) && skip[i].lo <= hi {
			limit = skip[i].lo - 1
		}
		if off, ok := s.h.bits.firstClear(x, limit); ok {
			return off, true
		}
		if limit == hi {
			return 0, false
		}
		x = limit + 1
	}
	return 0, false
}

// allocate hands out the next free offset to owner and moves the cursor.
func (s *subnet) allocate(owner string) (uint64, error) {
	off, ok := s.nextFit()
	if !ok {
		return 0, s.exhausted()
	}
	s.h.add(off, entry{owner: owner, state: Allocated, class: classNormal})
	s.cursor = off
	return off, nil
}

func (s *subnet) exhausted() *Error {
	l := s.lay
	return &Error{
		Kind: ErrExhausted, Subnet: s.name, Prefix: s.prefix,
		Detail: fmt.Sprintf("no free address in [%s, %s]", l.addr(l.start), l.addr(l.end)),
	}
}

func (s *subnet) outsidePrefix(a netip.Addr) *Error {
	return &Error{
		Kind: ErrOutOfRange, Subnet: s.name, Prefix: s.prefix, Addr: a,
		Detail: fmt.Sprintf("address %s is outside the prefix", a),
	}
}

func (s *subnet) inUse(a netip.Addr, owner string, e entry) *Error {
	return &Error{
		Kind: ErrInUse, Subnet: s.name, Addr: a, Owner: owner, Holder: e.owner,
		Detail: fmt.Sprintf("address %s is %s by %q (requested by %q)", a, held(e.state), e.owner, owner),
	}
}

func (s *subnet) notAllocated(a netip.Addr, owner string) *Error {
	return &Error{
		Kind: ErrNotAllocated, Subnet: s.name, Addr: a, Owner: owner,
		Detail: fmt.Sprintf("address %s is not allocated", a),
	}
}

func held(st State) string {
	if st == Retained {
		return "retained"
	}
	return "allocated"
}

// assign gives a to owner. Reserved addresses may be assigned; blocked ones may
// not. If owner already holds a, a retained address becomes allocated again and
// an allocated one is left as it is.
func (s *subnet) assign(a netip.Addr, owner string) error {
	off, ok := s.lay.offset(a)
	if !ok {
		return s.outsidePrefix(a)
	}
	if err := s.lay.refuse(off, a); err != nil {
		err.Owner = owner
		return err
	}
	if e, ok := s.h.owners[off]; ok {
		if e.owner != owner {
			return s.inUse(a, owner, e)
		}
		if e.state == Retained {
			s.h.retained--
			e.state = Allocated
			s.h.owners[off] = e
		}
		return nil
	}
	s.h.add(off, entry{owner: owner, state: Allocated, class: s.lay.class(off)})
	return nil
}

// heldBy returns the offset and entry of a if owner holds it.
func (s *subnet) heldBy(a netip.Addr, owner string) (uint64, entry, error) {
	off, ok := s.lay.offset(a)
	if !ok {
		return 0, entry{}, s.outsidePrefix(a)
	}
	e, ok := s.h.owners[off]
	if !ok {
		return 0, entry{}, s.notAllocated(a, owner)
	}
	if e.owner != owner {
		return 0, entry{}, s.inUse(a, owner, e)
	}
	return off, e, nil
}

// release frees a if owner holds it (allocated or retained).
func (s *subnet) release(a netip.Addr, owner string) error {
	off, e, err := s.heldBy(a, owner)
	if err != nil {
		return err
	}
	s.h.remove(off, e)
	return nil
}

// retain keeps a held for owner without it being allocated.
func (s *subnet) retain(a netip.Addr, owner string) error {
	off, e, err := s.heldBy(a, owner)
	if err != nil {
		return err
	}
	if e.state != Retained {
		s.h.retained++
		e.state = Retained
		s.h.owners[off] = e
	}
	return nil
}

// setLayout installs a new configuration and reclassifies every held offset.
func (s *subnet) setLayout(l *layout) {
	s.lay = l
	s.h.stranded, s.h.resUsed = 0, 0
	for off, e := range s.h.owners {
		if c := l.class(off); c != e.class {
			e.class = c
			s.h.owners[off] = e
		}
		s.h.count(entry{class: e.class}, 1)
	}
}

// Stats are the address counts of a subnet, or summed over the subnets of a
// network and family (saturating at the maximum uint64).
type Stats struct {
	// Total: allocatable addresses, those in [Start, End] other than the network,
	// broadcast and gateway addresses and the excluded ranges. Reserved addresses
	// are counted.
	Total uint64
	// Reserved: reserved addresses counted in Total.
	Reserved uint64
	// Used: held addresses, allocated or retained, including stranded ones.
	Used uint64
	// Retained: held addresses in state Retained (counted in Used).
	Retained uint64
	// Available: addresses next-fit can still hand out.
	Available uint64
	// Stranded: held addresses that are no longer allocatable because the
	// configuration changed (excluded, or outside [Start, End]); counted in Used
	// but not in Total. They are never handed out again once released.
	Stranded uint64
}

func (s *subnet) stats() Stats {
	l, h := s.lay, &s.h
	used := uint64(len(h.owners))
	normalUsed := used - h.stranded - h.resUsed
	return Stats{
		Total:     l.total,
		Reserved:  l.reservedN,
		Used:      used,
		Retained:  h.retained,
		Available: l.total - l.reservedN - normalUsed,
		Stranded:  h.stranded,
	}
}

// add adds o to st, saturating each count at the maximum uint64.
func (st *Stats) add(o Stats) {
	sat := func(a, b uint64) uint64 {
		if a+b < a {
			return ^uint64(0)
		}
		return a + b
	}
	st.Total = sat(st.Total, o.Total)
	st.Reserved = sat(st.Reserved, o.Reserved)
	st.Used = sat(st.Used, o.Used)
	st.Retained = sat(st.Retained, o.Retained)
	st.Available = sat(st.Available, o.Available)
	st.Stranded = sat(st.Stranded, o.Stranded)
}

// transfer hands a, held by from, to owner to in the given state, in one step:
// the address is never free in between.
func (s *subnet) transfer(a netip.Addr, from, to string, st State) error {
	off, e, err := s.heldBy(a, from)
	if err != nil {
		return err
	}
	s.h.remove(off, e)
	e.owner, e.state = to, st
	s.h.add(off, e)
	return nil
}
