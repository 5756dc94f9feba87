package endpointstore

import (
	"sync"

	bolt "go.etcd.io/bbolt"
)

// groupCommit lets concurrent writes share one transaction, and so one
// fsync. A write that finds no commit running commits at once, alone; writes
// that arrive while a commit runs wait for it and then go together in the
// next one, led by the first of them. No write is delayed to wait for
// company (bbolt's Batch waits MaxBatchDelay, which a lone write would pay
// in full), and each write returns only after the transaction holding it is
// committed and synced.
type groupCommit struct {
	db *bolt.DB

	mu      sync.Mutex
	running bool
	pending []*pendingWrite
}

type pendingWrite struct {
	fn  func(*bolt.Bucket) error
	err error
	// done receives true once the write is committed (or failed; err says
	// which), or false when its writer is to lead the next commit.
	done chan bool
}

// write applies fn to the endpoints bucket in a committed transaction. An
// error from fn fails that write alone: fn must then have changed nothing
// (bbolt's Put and Delete check their arguments before they write). A
// failed commit fails every write it held.
func (g *groupCommit) write(fn func(*bolt.Bucket) error) error {
	w := &pendingWrite{fn: fn, done: make(chan bool, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, w)
	lead := !g.running
	g.running = true
	g.mu.Unlock()
	if !lead && <-w.done {
		return w.err
	}
	g.mu.Lock()
	batch := g.pending
	g.pending = nil
	g.mu.Unlock()

	err := g.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketName)
		for _, p := range batch {
			p.err = p.fn(b)
		}
		return nil
	})

	g.mu.Lock()
	if len(g.pending) > 0 {
		g.pending[0].done <- false
	} else {
		g.running = false
	}
	g.mu.Unlock()
	for _, p := range batch {
		if err != nil {
			p.err = err
		}
		if p != w {
			p.done <- true
		}
	}
	return w.err
}
