// Package ops is the data plane's only contact with the kernel: it reads
// routes, rules, neighbours, FDB entries, addresses and links over netlink
// into state values, and applies a state.Plan with idempotent writes. It
// holds no policy; what to write comes from the state package.
//
// Every Handle is bound to one network namespace through its own netlink
// sockets, so no call here moves the caller's thread between namespaces.
package ops

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Handle talks netlink to one network namespace.
type Handle struct {
	nl *netlink.Handle
	ns string // the namespace's path; "" for the process's own

	strictOnce sync.Once
	strict     *netlink.Handle // nil until first used, or if it cannot be made

	dumper linkDumper // Read's lean link dump
}

// Open returns a handle for the network namespace at nsPath (for example
// /run/netns/node-1 or /proc/<pid>/ns/net). An empty path means the
// namespace the process was started in.
func Open(nsPath string) (*Handle, error) {
	if nsPath == "" {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return nil, fmt.Errorf("open netlink handle: %w", err)
		}
		return &Handle{nl: h}, nil
	}
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", nsPath, err)
	}
	defer func() { _ = ns.Close() }()
	h, err := handleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("open netlink handle in %s: %w", nsPath, err)
	}
	return &Handle{nl: h, ns: nsPath}, nil
}

// handleAt creates the netlink sockets inside ns. The library enters ns on
// the current thread for the socket() call and moves it back; doing that on
// a fresh goroutine whose thread stays locked means that, should moving back
// ever fail, the thread is discarded with the goroutine rather than reused.
func handleAt(ns netns.NsHandle) (*netlink.Handle, error) {
	type result struct {
		h   *netlink.Handle
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
		ch <- result{h, err}
	}()
	r := <-ch
	return r.h, r.err
}

// Close releases the handle's sockets.
func (h *Handle) Close() {
	h.nl.Close()
	h.dumper.close()
	h.strictOnce.Do(func() {})
	if h.strict != nil {
		h.strict.Close()
	}
}

// filtered returns a second handle on the namespace whose socket asks the
// kernel for strict checking of dump requests (NETLINK_GET_STRICT_CHK,
// Linux 4.20): the kernel then applies a dump's filter (a route table, for
// instance) itself instead of dumping everything. It is made on first use
// and kept apart from h.nl so that no other dump meets the stricter checks.
// When it cannot be made, h.nl is returned: the library filters the full
// dump instead, with the same result.
func (h *Handle) filtered() *netlink.Handle {
	h.strictOnce.Do(func() {
		var (
			nh  *netlink.Handle
			err error
		)
		if h.ns == "" {
			nh, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		} else {
			var ns netns.NsHandle
			if ns, err = netns.GetFromPath(h.ns); err == nil {
				nh, err = handleAt(ns)
				_ = ns.Close()
			}
		}
		if err != nil {
			return
		}
		if err := nh.SetStrictCheck(true); err != nil {
			nh.Close()
			return
		}
		h.strict = nh
	})
	if h.strict == nil {
		return h.nl
	}
	return h.strict
}

// ignore reports whether err means the write's goal already holds: adding
// what exists, deleting what is gone.
func ignore(err error, errnos ...unix.Errno) bool {
	for _, e := range errnos {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// retryDump runs a netlink dump again when the kernel reports that the
// table changed during it (NLM_F_DUMP_INTR): the partial result is not used.
func retryDump[T any](what string, dump func() (T, error)) (T, error) {
	var (
		v   T
		err error
	)
	for range 5 {
		v, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return v, fmt.Errorf("list %s: %w", what, err)
	}
	return v, nil
}
