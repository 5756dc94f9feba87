// Package lifecycle starts a process's components in the order they were
// built and stops them in reverse. A component registers its hooks with
// Append as it is built; Start runs every start hook in registration order
// and, when one fails, stops the ones already started in reverse; Stop runs
// the stop hooks of the started components in reverse and joins their
// errors. It is the shape of cilium's hive cell.Lifecycle and
// controller-runtime's runnable groups, without a dependency-injection
// container: the caller builds the components itself, in order.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
)

// Hook is one component's start and stop. Either function may be nil.
type Hook struct {
	// Name names the component in errors.
	Name string
	// Start brings the component up. It must not block for the component's
	// life: a component that runs goes on in a goroutine of its own.
	Start func(context.Context) error
	// Stop takes the component down. It is called only when Start returned
	// nil, and should return when its context ends.
	Stop func(context.Context) error
}

// Lifecycle holds the hooks in registration order. The zero value is ready
// to use; it is not safe for concurrent use.
type Lifecycle struct {
	hooks []Hook
	// started counts the hooks, from the first, whose Start succeeded and
	// whose Stop has not run yet.
	started int
}

// Append registers h after every hook registered before it.
func (l *Lifecycle) Append(h Hook) { l.hooks = append(l.hooks, h) }

// Start runs the start hooks not started yet, in registration order. When
// one fails, it stops the hooks already started, in reverse, with a context
// that keeps ctx's values but not its end, and returns the start error
// joined with theirs.
func (l *Lifecycle) Start(ctx context.Context) error {
	for l.started < len(l.hooks) {
		h := l.hooks[l.started]
		if h.Start != nil {
			if err := h.Start(ctx); err != nil {
				return errors.Join(err, l.Stop(context.WithoutCancel(ctx)))
			}
		}
		l.started++
	}
	return nil
}

// Stop runs the stop hooks of the started components in reverse
// registration order and returns their errors joined, each wrapped with
// its hook's name. It waits for a hook no longer than ctx lasts: once ctx
// ends, the hook running is left to finish on its own, the hooks not run
// yet are not run, and Stop returns with an error naming them.
func (l *Lifecycle) Stop(ctx context.Context) error {
	var errs []error
	for ; l.started > 0; l.started-- {
		if ctx.Err() != nil {
			errs = append(errs, l.abandon(context.Cause(ctx)))
			break
		}
		h := l.hooks[l.started-1]
		if h.Stop == nil {
			continue
		}
		if err := stopBounded(ctx, h); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", h.Name, err))
		}
	}
	return errors.Join(errs...)
}

// abandon forgets the hooks still started, whose stops Stop had no time
// for, and names them in an error wrapping cause.
func (l *Lifecycle) abandon(cause error) error {
	var left []string
	for i := l.started - 1; i >= 0; i-- {
		if l.hooks[i].Stop != nil {
			left = append(left, l.hooks[i].Name)
		}
	}
	l.started = 0
	if len(left) == 0 {
		return nil
	}
	return fmt.Errorf("not stopped: %q: %w", left, cause)
}

// stopBounded runs h.Stop and waits for it until ctx ends.
func stopBounded(ctx context.Context, h Hook) error {
	done := make(chan error, 1)
	go func() { done <- h.Stop(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		select {
		case err := <-done:
			return err
		default:
			return ctx.Err()
		}
	}
}
