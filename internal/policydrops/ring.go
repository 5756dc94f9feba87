package policydrops

import "sync"

// Ring keeps the most recent drops, at most its size, and counts those it
// let go. It is safe for concurrent use.
type Ring struct {
	mu    sync.Mutex
	drops []Drop // circular once full; next is the oldest
	next  int
	size  int
	lost  uint64
}

// NewRing returns a ring of size drops (at least 1).
func NewRing(size int) *Ring {
	return &Ring{size: max(size, 1)}
}

// Add records d, letting the oldest drop go when the ring is full.
func (r *Ring) Add(d Drop) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.drops) < r.size {
		r.drops = append(r.drops, d)
		return
	}
	r.drops[r.next] = d
	r.next = (r.next + 1) % r.size
	r.lost++
}

// Report is the ring's content for node, oldest first.
func (r *Ring) Report(node string) Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]Drop, 0, len(r.drops))
	out = append(out, r.drops[r.next:]...)
	out = append(out, r.drops[:r.next]...)
	return Report{Node: node, Drops: out, Lost: r.lost}
}
