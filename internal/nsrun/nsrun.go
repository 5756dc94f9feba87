// Package nsrun runs code inside a network namespace without ever moving a
// caller's thread there.
//
// Do starts a fresh goroutine, locks it to its OS thread, enters the target
// namespace and runs fn. The thread is never unlocked, so the Go runtime
// discards it when the goroutine ends instead of reusing a thread that is in
// the wrong namespace. Sockets and netlink handles fn opens stay bound to the
// namespace wherever they are used afterwards.
package nsrun

import (
	"fmt"
	"runtime"

	"github.com/vishvananda/netns"
)

// Do runs fn in the network namespace at nsPath (a path such as
// /var/run/netns/NAME or /proc/PID/ns/net) and returns its error. An empty
// nsPath runs fn in the caller's own namespace, on the caller's goroutine.
func Do(nsPath string, fn func() error) error {
	if nsPath == "" {
		return fn()
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		target, err := netns.GetFromPath(nsPath)
		if err != nil {
			errc <- fmt.Errorf("open network namespace %s: %w", nsPath, err)
			return
		}
		defer func() { _ = target.Close() }()
		if err := netns.Set(target); err != nil {
			errc <- fmt.Errorf("enter network namespace %s: %w", nsPath, err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}
