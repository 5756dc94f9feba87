// Package nstest gives tests of the data plane a network namespace of their
// own, so they exercise the real kernel without touching the host's
// namespace. It is for tests only.
//
// Cleanup: New registers the namespace's removal with tb.Cleanup before it
// creates the namespace, so a test that fails, skips or panics at any point
// after that still removes it, and so does a creation that failed half way.
// Cleanups do not run when the test binary is killed (a -timeout, a signal);
// for that the name holds the pid of the process that made it, and the first
// New of every test process removes the namespaces of processes that are gone.
package nstest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/test/infra/lab/proc"
)

// Prefix starts the name of every namespace this package makes, so leftovers
// are easy to find (ip netns list | grep esttest-). The full name is
// <Prefix><pid>-<8 hex digits>, pid being the test process that made it.
const Prefix = "esttest-"

// Dir is where named network namespaces are pinned (shared with `ip netns`).
const Dir = "/run/netns"

// ownedName matches the names New gives, capturing the maker's pid.
var ownedName = regexp.MustCompile("^" + regexp.QuoteMeta(Prefix) + `([0-9]+)-[0-9a-f]{8}$`)

// sweepOnce makes Dir a shared mount point (sharedErr) and sweeps orphans,
// once per test process.
var (
	sweepOnce sync.Once
	sharedErr error
)

// RequireRoot skips the test unless it runs as root.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root: creates network namespaces and links (run go test as root)")
	}
}

// New creates a named network namespace, removed when the test ends however
// it ends, and returns its path (/run/netns/<name>). The test may remove the
// namespace itself first.
func New(tb testing.TB) string {
	tb.Helper()
	RequireRoot(tb)
	sweepOnce.Do(func() {
		sharedErr = nsrun.SharedDir(Dir)
		for _, err := range SweepOrphans() {
			tb.Logf("remove a namespace of a killed test run: %v", err)
		}
	})
	if sharedErr != nil {
		tb.Fatalf("network namespaces: %v", sharedErr)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("random namespace name: %v", err)
	}
	name := Prefix + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
	tb.Cleanup(func() {
		if err := remove(name); err != nil {
			tb.Errorf("delete network namespace %s: %v", name, err)
		}
	})
	if err := create(name); err != nil {
		tb.Fatalf("create network namespace %s: %v", name, err)
	}
	return filepath.Join(Dir, name)
}

// create makes the namespace on a throw-away thread: netns.NewNamed moves the
// calling thread into the new namespace, so the goroutine keeps its thread
// locked and the runtime ends that thread when the goroutine returns.
func create(name string) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netns.NewNamed(name)
		if err != nil {
			errc <- fmt.Errorf("new named namespace: %w", err)
			return
		}
		errc <- h.Close()
	}()
	return <-errc
}

// remove unpins the namespace and deletes its pin file. A namespace that is
// gone, or a pin file that was never mounted on, is not an error.
func remove(name string) error {
	p := filepath.Join(Dir, name)
	if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil &&
		!errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("unmount %s: %w", p, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}

// SweepOrphans removes the namespaces New made in processes that no longer
// run (their test binary was killed before its cleanups), and returns what
// it could not remove. Namespaces of running processes, this one included,
// and names New does not give are left alone; so are those of a pid that
// another process took since, until a later sweep.
func SweepOrphans() []error {
	ents, err := os.ReadDir(Dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return []error{err}
	}
	var errs []error
	for _, e := range ents {
		m := ownedName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		if pid, err := strconv.Atoi(m[1]); err != nil || proc.Alive(pid) {
			continue
		}
		if err := remove(e.Name()); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
