package datapath

// What the loop has done, for the daemon's readiness and node status.
//
// A pass that fails is retried, and a pass that hangs (a netlink call the
// kernel never answers, a lock held by a stuck part) runs no other: in
// either case the loop is alive but the node's data path lags the
// cluster. Progress records when the loop started, when its last pass
// started and ended with what error, and when its last fully successful
// pass ended, so a reader can tell how long the data path has gone
// without a good pass however the loop is stuck: a hung pass never
// reaches the code after it, so the reader judges from the clock, not
// from the loop.

import (
	"sync"
	"time"
)

// PassState is what Progress knows at one moment.
type PassState struct {
	// Started is when the loop's Progress was made, before its first pass.
	Started time.Time
	// LastGood is when the last fully successful pass ended; zero before
	// the first.
	LastGood time.Time
	// LastStart is when the last pass started; zero before the first.
	LastStart time.Time
	// Running is true while the pass that started at LastStart runs.
	Running bool
	// LastErr is the error of the last pass that ended; nil when it
	// succeeded or none has ended.
	LastErr error
}

// Progress records the loop's passes (Options.Progress). It is safe for
// concurrent use; a nil *Progress records nothing.
type Progress struct {
	mu sync.Mutex
	st PassState
}

// NewProgress returns a Progress whose loop starts now.
func NewProgress() *Progress {
	return &Progress{st: PassState{Started: time.Now()}}
}

// State returns what the Progress knows now.
func (p *Progress) State() PassState {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.st
}

// begin records a pass that starts at start.
func (p *Progress) begin(start time.Time) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.st.LastStart, p.st.Running = start, true
}

// end records the end, at end, of the running pass, with its error.
func (p *Progress) end(end time.Time, err error) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.st.Running, p.st.LastErr = false, err
	if err == nil {
		p.st.LastGood = end
	}
}
