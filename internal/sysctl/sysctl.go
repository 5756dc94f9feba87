// Package sysctl writes kernel settings under /proc/sys in a given network
// namespace without moving the caller's thread into it.
//
// A container that is not privileged sees /proc/sys read-only; the daemon
// then reaches it through a writable mount of the host's (SetRoot, e.g.
// /host/proc/sys). The files under net/ still show the namespace of the
// thread that opens them, whichever procfs mount they are opened through.
//
// /proc/sys/net shows the namespace of the thread that opens it, so writes for
// another namespace run on a fresh goroutine whose locked thread enters that
// namespace and is never handed back: the runtime discards the thread with the
// goroutine, and no caller's thread ever changes namespace.
package sysctl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/estuary-cni/estuary/internal/nsrun"
)

// Setting is one value under /proc/sys, keyed by its path there, e.g.
// {"net/ipv4/ip_forward", "1"}.
type Setting struct {
	Key, Value string
}

// String renders the setting as sysctl(8) does: net.ipv4.ip_forward=1.
func (s Setting) String() string {
	return strings.ReplaceAll(s.Key, "/", ".") + "=" + s.Value
}

// List renders settings for a log line.
func List(settings []Setting) string {
	parts := make([]string, len(settings))
	for i, s := range settings {
		parts[i] = s.String()
	}
	return strings.Join(parts, ",")
}

// Write sets each setting in the network namespace at nsPath (the process's
// own namespace when nsPath is empty), skipping those that already hold their
// value. It reports every failure, not just the first.
func Write(nsPath string, settings []Setting) error {
	return nsrun.Do(nsPath, func() error { return apply(nsPath, settings) })
}

// Read returns the value of key (a path under /proc/sys) in the network
// namespace at nsPath (the process's own when empty).
func Read(nsPath, key string) (string, error) {
	var v string
	err := nsrun.Do(nsPath, func() error {
		b, err := os.ReadFile(filepath.Join(Root(), key)) // #nosec G304 -- a /proc/sys path
		if err != nil {
			return fmt.Errorf("sysctl %s: %w", strings.ReplaceAll(key, "/", "."), err)
		}
		v = strings.TrimSpace(string(b))
		return nil
	})
	return v, err
}

// Recorder learns the value a setting held before Write changed it, so
// that the change can be undone (the daemon's node journal).
type Recorder interface {
	// Before is called with the namespace path Write was given, the
	// setting about to be written and the value it holds, before writing.
	// An error from Before stops that setting's write.
	Before(nsPath string, s Setting, old string) error
}

var recorder atomic.Pointer[Recorder]

// DefaultRoot is where /proc/sys is when SetRoot was not called.
const DefaultRoot = "/proc/sys"

var root atomic.Pointer[string]

// SetRoot makes Read and Write use dir as /proc/sys from now on, in this
// process; "" restores DefaultRoot.
func SetRoot(dir string) {
	if dir == "" {
		root.Store(nil)
		return
	}
	root.Store(&dir)
}

// Root is the directory Read and Write use as /proc/sys.
func Root() string {
	if p := root.Load(); p != nil {
		return *p
	}
	return DefaultRoot
}

// SetRecorder makes r see every value Write changes from now on, in this
// process; nil stops recording.
func SetRecorder(r Recorder) {
	if r == nil {
		recorder.Store(nil)
		return
	}
	recorder.Store(&r)
}

func apply(nsPath string, settings []Setting) error {
	var errs []error
	rec := recorder.Load()
	dir := Root()
	for _, s := range settings {
		path := filepath.Join(dir, s.Key)
		cur, err := os.ReadFile(path) // #nosec G304 -- keys are fixed /proc/sys paths
		old := strings.TrimSpace(string(cur))
		if err == nil && old == s.Value {
			continue
		}
		if err == nil && rec != nil {
			if err := (*rec).Before(nsPath, s, old); err != nil {
				errs = append(errs, fmt.Errorf("sysctl %s: record the value before: %w", s, err))
				continue
			}
		}
		if err := os.WriteFile(path, []byte(s.Value), 0o644); err != nil { // #nosec G306 -- a /proc/sys file
			errs = append(errs, fmt.Errorf("sysctl %s: %w", s, err))
		}
	}
	return errors.Join(errs...)
}
