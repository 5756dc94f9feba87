// Package ops is the data plane's only contact with the kernel: it reads
// routes, rules, neighbours, FDB entries, addresses and links over netlink
// into state values, applies a state.Plan with idempotent writes, makes the
// devices, the nftables source NAT and the tc attachment estuary owns, and
// dumps a namespace's state for people. It holds no policy; what to write
// comes from the state package, and so do the names of what estuary owns
// (state/routing.go).
//
// # Design
//
// A Handle is bound to one network namespace through one rtnetlink socket
// (plus, made on first use, a strict-checking twin for filtered dumps and
// the nftables socket), so no call here moves the caller's thread between
// namespaces. It hands out one small type per kernel object family, each
// the Handle seen through a type whose methods are that family's:
//
//	Links    any link: look up, list, set alias/MAC/up, delete
//	Devices  the links estuary makes: VXLAN device, veths, bridge
//	VLANs    the underlay's marked 802.1Q sub-interfaces
//	Addrs    addresses (and a link's own addresses)
//	Routes   routes
//	Rules    policy rules
//	Neighs   neighbour entries and the FDB
//	TC       the fast path's tc filter
//	Segment  ARP and NDP on a link's segment (packet sockets)
//	NAT      the source NAT's nftables tables
//
// *Routes and the others are *Handle converted, so handing one out costs
// nothing and every family shares the one socket. Apply dispatches each step
// of a Plan to its family; Read and Dumps gather from them.
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

	natMu sync.Mutex
	nat   *NAT // nil until first used
}

// The families of a Handle: see the package comment.
type (
	// Links reads and changes any link of the namespace.
	Links Handle
	// Devices makes the links estuary owns (state/routing.go).
	Devices Handle
	// VLANs makes, lists and deletes the underlay's 802.1Q sub-interfaces.
	VLANs Handle
	// Addrs writes and reads addresses.
	Addrs Handle
	// Routes writes and reads routes.
	Routes Handle
	// Rules writes and reads policy rules.
	Rules Handle
	// Neighs writes, reads and watches neighbour entries and the FDB.
	Neighs Handle
	// TC attaches and detaches the fast path's tc filter.
	TC Handle
	// Segment sends and receives ARP and NDP on a link's segment.
	Segment Handle
)

// Links returns the handle's link family.
func (h *Handle) Links() *Links { return (*Links)(h) }

// Devices returns the handle's writer of estuary's devices.
func (h *Handle) Devices() *Devices { return (*Devices)(h) }

// VLANs returns the handle's writer of 802.1Q sub-interfaces.
func (h *Handle) VLANs() *VLANs { return (*VLANs)(h) }

// Addrs returns the handle's address family.
func (h *Handle) Addrs() *Addrs { return (*Addrs)(h) }

// Routes returns the handle's route family.
func (h *Handle) Routes() *Routes { return (*Routes)(h) }

// Rules returns the handle's policy rule family.
func (h *Handle) Rules() *Rules { return (*Rules)(h) }

// Neighs returns the handle's neighbour and FDB family.
func (h *Handle) Neighs() *Neighs { return (*Neighs)(h) }

// TC returns the handle's traffic control writer.
func (h *Handle) TC() *TC { return (*TC)(h) }

// Segment returns the handle's ARP and NDP prober.
func (h *Handle) Segment() *Segment { return (*Segment)(h) }

// NAT returns the namespace's source NAT writer, opening its nftables
// socket on first use; a failed open is tried again on the next call.
func (h *Handle) NAT() (*NAT, error) {
	h.natMu.Lock()
	defer h.natMu.Unlock()
	if h.nat == nil {
		n, err := openNAT(h.ns)
		if err != nil {
			return nil, err
		}
		h.nat = n
	}
	return h.nat, nil
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
	h.natMu.Lock()
	if h.nat != nil {
		h.nat.close()
	}
	h.natMu.Unlock()
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
