// Package nstest gives tests of the data plane a network namespace of their
// own, so they exercise the real kernel without touching the host's
// namespace. It is for tests only.
package nstest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/vishvananda/netns"
)

// Prefix starts the name of every namespace this package makes, so leftovers
// of a killed test run are easy to find (ip netns list | grep esttest-).
const Prefix = "esttest-"

// RequireRoot skips the test unless it runs as root.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root: creates network namespaces and links (run go test as root)")
	}
}

// New creates a named network namespace, removed when the test ends, and
// returns its path (/run/netns/<name>).
func New(tb testing.TB) string {
	tb.Helper()
	RequireRoot(tb)
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		tb.Fatalf("random namespace name: %v", err)
	}
	name := Prefix + hex.EncodeToString(b[:])
	if err := create(name); err != nil {
		tb.Fatalf("create network namespace %s: %v", name, err)
	}
	tb.Cleanup(func() {
		if err := netns.DeleteNamed(name); err != nil {
			tb.Errorf("delete network namespace %s: %v", name, err)
		}
	})
	return filepath.Join("/run/netns", name)
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
