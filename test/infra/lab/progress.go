package lab

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress prints each step of a command with the time elapsed since it began.
type progress struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

func newProgress(out io.Writer) *progress {
	if out == nil {
		out = io.Discard
	}
	return &progress{out: out, start: time.Now()}
}

func (p *progress) elapsed() time.Duration { return time.Since(p.start) }

// step announces the beginning of a step.
func (p *progress) step(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = fmt.Fprintf(p.out, "[%6.1fs] %s\n", p.elapsed().Seconds(), fmt.Sprintf(format, args...))
}

// printf writes without a timestamp.
func (p *progress) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, _ = fmt.Fprintf(p.out, format, args...)
}
