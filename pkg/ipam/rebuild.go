package ipam

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
)

// Record is one held address, as the manager persists it.
type Record struct {
	Subnet string
	Addr   netip.Addr
	State  State
	Owner  string
}

// Records exports every held address, ordered by subnet name and then by
// address, so that Rebuild(Records()) reproduces the same state. Each subnet is
// read under its own lock; the export is consistent per subnet.
func (a *Allocator) Records() []Record {
	idx := a.idx.Load()
	var out []Record
	type held struct {
		off uint64
		e   entry
	}
	var buf []held
	for _, name := range idx.names {
		s := idx.subnets[name]
		s.mu.Lock()
		if s.removed {
			s.mu.Unlock()
			continue
		}
		l := s.lay
		buf = buf[:0]
		for off, e := range s.h.owners {
			buf = append(buf, held{off, e})
		}
		s.mu.Unlock()
		slices.SortFunc(buf, func(x, y held) int { return cmp.Compare(x.off, y.off) })
		out = slices.Grow(out, len(buf))
		for _, h := range buf {
			out = append(out, Record{Subnet: name, Addr: l.addr(h.off), State: h.e.state, Owner: h.e.owner})
		}
	}
	return out
}

// Rebuild replaces the allocation state of every subnet with records; subnets
// without records become empty. Cursors are left as they are (see SetCursor).
//
// Rebuild reports every problem in a *RebuildError but never silently drops an
// address that can be placed: a record whose subnet is unknown or whose address is
// outside the subnet's prefix cannot be kept; an address recorded twice stays held
// by the first record's owner and the error names both owners; a record with an
// empty owner or an invalid state is kept (as Allocated) and reported; Release
// with an empty owner frees such an address. Recorded
// addresses that are excluded or outside [Start, End] are kept as well; they are
// not a problem (a configuration change may have caused them) and show up as
// Stranded in Stats.
//
// The new state is built without holding any subnet lock and installed in all
// subnets at once.
func (a *Allocator) Rebuild(records []Record) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	idx := a.idx.Load()
	counts := make(map[string]int, len(idx.subnets))
	for i := range records {
		counts[records[i].Subnet]++
	}
	fresh := make(map[string]*holdings, len(idx.subnets))
	for name := range idx.subnets {
		h := newHoldings(counts[name])
		fresh[name] = &h
	}
	var problems []*Error
	var s *subnet
	var h *holdings
	for i := range records {
		r := &records[i]
		if s == nil || s.name != r.Subnet {
			s, h = idx.subnets[r.Subnet], fresh[r.Subnet]
		}
		if s == nil {
			problems = append(problems, &Error{Kind: ErrUnknownSubnet, Subnet: r.Subnet, Addr: r.Addr,
				Owner: r.Owner, Detail: fmt.Sprintf("record of address %s for %q: no such subnet", r.Addr, r.Owner)})
			continue
		}
		problems = append(problems, rebuildOne(s, h, r)...)
	}
	for _, name := range idx.names {
		idx.subnets[name].mu.Lock()
	}
	for _, name := range idx.names {
		idx.subnets[name].h = *fresh[name]
	}
	for _, name := range idx.names {
		idx.subnets[name].mu.Unlock()
	}
	if len(problems) > 0 {
		return &RebuildError{Problems: problems}
	}
	return nil
}

// rebuildOne places one record into h, the new state of s, and returns its
// problems. The caller holds Allocator.mu, so s.lay is stable.
func rebuildOne(s *subnet, h *holdings, r *Record) []*Error {
	l := s.lay
	off, ok := l.offset(r.Addr)
	if !ok {
		return []*Error{{Kind: ErrOutOfRange, Subnet: s.name, Prefix: s.prefix, Addr: r.Addr, Owner: r.Owner,
			Detail: fmt.Sprintf("record of address %s for %q: outside the prefix", r.Addr, r.Owner)}}
	}
	if e, dup := h.owners[off]; dup {
		return []*Error{{Kind: ErrInUse, Subnet: s.name, Addr: r.Addr, Owner: r.Owner, Holder: e.owner,
			Detail: fmt.Sprintf("address %s recorded twice, for %q and for %q; kept for %q",
				r.Addr, e.owner, r.Owner, e.owner)}}
	}
	var problems []*Error
	state := r.State
	if state != Allocated && state != Retained {
		problems = append(problems, &Error{Kind: ErrInvalidRequest, Subnet: s.name, Addr: r.Addr, Owner: r.Owner,
			Detail: fmt.Sprintf("record of address %s for %q has invalid state %s; kept as Allocated", r.Addr, r.Owner, state)})
		state = Allocated
	}
	if r.Owner == "" {
		problems = append(problems, &Error{Kind: ErrInvalidRequest, Subnet: s.name, Addr: r.Addr,
			Detail: fmt.Sprintf("record of address %s has no owner; kept occupied", r.Addr)})
	}
	h.add(off, entry{owner: r.Owner, state: state, class: l.class(off)})
	return problems
}
