package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vishvananda/netns"
)

// nodeSysctls are the host settings the daemon needs before any pod: the
// node routes between pods and the rest of the network. The per-veth
// settings (proxy_arp, forwarding, IPv6's) are podnet's, written per pod.
var nodeSysctls = []sysctl{{key: "net/ipv4/ip_forward", value: "1"}}

// sysctl is one setting under /proc/sys.
type sysctl struct {
	key, value string
}

func (s sysctl) String() string {
	return strings.ReplaceAll(s.key, "/", ".") + "=" + s.value
}

// writeSysctls writes settings in the network namespace at nsPath. /proc/sys/net
// shows the namespace of the thread that opens it, so the writes run on a
// fresh goroutine whose locked thread enters nsPath and is never handed back:
// the runtime discards the thread with the goroutine, and no caller's thread
// changes namespace.
func writeSysctls(nsPath string, settings []sysctl) error {
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
			errs = append(errs, fmt.Errorf("sysctl %s: %w", s, err))
		}
	}
	return errors.Join(errs...)
}
