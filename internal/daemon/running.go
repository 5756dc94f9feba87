package daemon

import (
	"fmt"
	"sync"
)

// running tracks the daemon's goroutines: the first failure is reported on
// failed, and wait returns once every one has returned.
type running struct {
	wg     sync.WaitGroup
	failed chan error
	// synced is closed once the IPInstance cache has synced.
	synced chan struct{}
}

func newRunning() *running {
	return &running{failed: make(chan error, 1), synced: make(chan struct{})}
}

// goFunc runs fn, reporting its error (the first of all) as name's.
func (r *running) goFunc(name string, fn func() error) {
	r.wg.Go(func() {
		if err := fn(); err != nil {
			select {
			case r.failed <- fmt.Errorf("%s: %w", name, err):
			default:
			}
		}
	})
}

func (r *running) wait() { r.wg.Wait() }
