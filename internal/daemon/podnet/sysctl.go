package podnet

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
)

// sysctl is one setting under /proc/sys, e.g. {"net/ipv4/conf/x/proxy_arp", "1"}.
type sysctl struct {
	key, value string
}

// writeSysctls writes the settings in the network namespace at nsPath (the
// process's own namespace when empty). /proc/sys/net shows the namespace of
// the thread that opens it, so for another namespace the writes run on a
// fresh goroutine whose locked thread enters nsPath and is never handed back:
// the runtime discards the thread with the goroutine, and no caller's thread
// ever changes namespace.
func writeSysctls(nsPath string, settings []sysctl) error {
	if nsPath == "" {
		return applySysctls(settings)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
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
		errc <- applySysctls(settings)
	}()
	return <-errc
}

// applySysctls writes each setting that does not already hold its value.
func applySysctls(settings []sysctl) error {
	var errs []error
	for _, s := range settings {
		path := filepath.Join("/proc/sys", s.key)
		cur, err := os.ReadFile(path) // #nosec G304 -- fixed /proc/sys keys
		if err == nil && strings.TrimSpace(string(cur)) == s.value {
			continue
		}
		if err := os.WriteFile(path, []byte(s.value), 0o644); err != nil { // #nosec G306 -- /proc/sys file
			errs = append(errs, fmt.Errorf("sysctl %s=%s: %w", strings.ReplaceAll(s.key, "/", "."), s.value, err))
		}
	}
	return errors.Join(errs...)
}
