// Package nsrun runs code inside a network namespace without ever moving a
// caller's thread there, and keeps the directory named namespaces are
// pinned in a shared mount point (SharedDir).
//
// Do is containernetworking's ns.WithNetNSPath: it runs fn on a fresh
// goroutine locked to its OS thread inside the target namespace, and
// returns that thread to the caller's namespace (or lets it die with the
// goroutine when it cannot), so no thread is ever reused in the wrong
// namespace. Sockets and netlink handles fn opens stay bound to the
// namespace wherever they are used afterwards.
package nsrun

import (
	"errors"
	"fmt"
	"os"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
)

// Do runs fn in the network namespace at nsPath (a path such as
// /var/run/netns/NAME or /proc/PID/ns/net) and returns its error. An empty
// nsPath runs fn in the caller's own namespace, on the caller's goroutine.
func Do(nsPath string, fn func() error) error {
	if nsPath == "" {
		return fn()
	}
	return ns.WithNetNSPath(nsPath, func(ns.NetNS) error { return fn() })
}

// SharedDir makes dir (the directory named namespaces are pinned in,
// /var/run/netns) a mount point with shared propagation, as `ip netns add`
// does the first time it runs. If namespaces were pinned in a plain
// directory, a later `ip netns add` (a test, an operator, the lab) would
// bind-mount dir over itself and hide every pin beneath the new mount,
// where nothing can unmount or delete them. Idempotent.
func SharedDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // G301: shared with iproute2, which makes it 0755 too
		return fmt.Errorf("create %s: %w", dir, err)
	}
	err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) { // not a mount point yet
		if err = unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err == nil {
			err = unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
		}
	}
	if err != nil {
		return fmt.Errorf("make %s a shared mount point: %w", dir, err)
	}
	return nil
}
