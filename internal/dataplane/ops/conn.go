package ops

// # Design: one connection, one type per kernel object family
//
// A conn is one network namespace's rtnetlink connection: the socket every
// family reads and writes through, a strict-checking twin made on first use
// for filtered dumps, and the lean link dumper Read resolves names with. It
// is opened inside the namespace, so no call here moves the caller's thread
// between namespaces.
//
// Each kernel object family is a type of its own holding a pointer to the
// conn; its methods are the only code that reads or writes objects of its
// family:
//
//	Links    any link: look up, list, set alias/MAC/up, delete, raw dump
//	Devices  the links estuary makes: VXLAN device, veths, bridge
//	VLANs    the underlay's marked 802.1Q sub-interfaces
//	Addrs    addresses (and a link's own addresses)
//	Routes   routes
//	Rules    policy rules
//	Neighs   neighbour entries, the FDB and neighbour misses
//	TC       the fast path's tc filter, qdiscs and filters
//	Segment  ARP and NDP on a link's segment (packet sockets)
//
// A Handle opens the conn and hands out the families; Apply dispatches each
// step of a Plan to its family and Read gathers from them. nftables is a
// different socket: NAT (OpenNAT) and Policy (OpenPolicy) each open their
// own over nftConn, and the link watch (WatchLinks) and the drop log
// (OpenDropLog) open theirs, since a subscription owns its socket.

import (
	"errors"
	"fmt"
	"runtime"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// conn is one namespace's rtnetlink connection, shared by the families.
type conn struct {
	nl *netlink.Handle
	ns string // the namespace's path; "" for the process's own

	strictOnce sync.Once
	strict     *netlink.Handle // nil until first used, or if it cannot be made

	dumper linkDumper // Read's lean link dump
}

// dial opens a conn in the network namespace at nsPath ("" for the
// process's own).
func dial(nsPath string) (*conn, error) {
	if nsPath == "" {
		h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return nil, fmt.Errorf("open netlink handle: %w", err)
		}
		return &conn{nl: h}, nil
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
	return &conn{nl: h, ns: nsPath}, nil
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

// close releases the conn's sockets.
func (c *conn) close() {
	c.nl.Close()
	c.dumper.close()
	c.strictOnce.Do(func() {})
	if c.strict != nil {
		c.strict.Close()
	}
}

// filtered returns a second handle on the namespace whose socket asks the
// kernel for strict checking of dump requests (NETLINK_GET_STRICT_CHK,
// Linux 4.20): the kernel then applies a dump's filter (a route table, for
// instance) itself instead of dumping everything. It is made on first use
// and kept apart from c.nl so that no other dump meets the stricter checks.
// When it cannot be made, c.nl is returned: the library filters the full
// dump instead, with the same result.
func (c *conn) filtered() *netlink.Handle {
	c.strictOnce.Do(func() {
		var (
			nh  *netlink.Handle
			err error
		)
		if c.ns == "" {
			nh, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		} else {
			var ns netns.NsHandle
			if ns, err = netns.GetFromPath(c.ns); err == nil {
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
		c.strict = nh
	})
	if c.strict == nil {
		return c.nl
	}
	return c.strict
}

// links lists the namespace's link names and indexes through the lean
// dumper.
func (c *conn) links() (links, error) {
	return retryDump("links", func() (links, error) { return c.dumper.dump(c.ns) })
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
