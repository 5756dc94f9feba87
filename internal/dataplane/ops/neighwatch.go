package ops

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// errSubscriptionClosed reports a neighbour subscription the kernel side
// ended without an error of its own.
var errSubscriptionClosed = errors.New("neighbour subscription closed")

// WatchMisses subscribes to the neighbour events of the handle's
// namespace and calls miss, one call at a time, for every address the kernel
// asks user space to resolve on the link named dev: an application probe
// (RTM_GETNEIGH, sent when the device's app_solicit is set) or an entry
// reported INCOMPLETE. It returns nil when ctx ends and an error when the
// subscription fails or ends; the caller subscribes again. The link is
// looked up by name again whenever an event names an unknown index, so a
// re-created device is followed.
func (h *Neighs) WatchMisses(ctx context.Context, dev string, miss func(netip.Addr)) error {
	ch := make(chan netlink.NeighUpdate, 256)
	done := make(chan struct{})
	var subErr firstError
	if err := h.subscribe(ch, done, subErr.set); err != nil {
		return fmt.Errorf("watch neighbour misses on %s: subscribe: %w", dev, err)
	}
	defer func() {
		close(done)
		for range ch { // the library's reader ends after the socket closes
		}
	}()
	index := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-ch:
			if !ok {
				err := subErr.get()
				return fmt.Errorf("watch neighbour misses on %s: %w", dev, errors.Join(errSubscriptionClosed, err))
			}
			if ip, ok := h.missOn(dev, &index, u); ok {
				miss(ip)
			}
		}
	}
}

// missOn reports the address of u if u is a resolution request on dev.
// index caches dev's link index.
func (h *Neighs) missOn(dev string, index *int, u netlink.NeighUpdate) (netip.Addr, bool) {
	isMiss := u.Type == unix.RTM_GETNEIGH || (u.Type == unix.RTM_NEWNEIGH && u.State&netlink.NUD_INCOMPLETE != 0)
	if !isMiss || (u.Family != unix.AF_INET && u.Family != unix.AF_INET6) {
		return netip.Addr{}, false
	}
	if u.LinkIndex != *index {
		link, err := h.nl.LinkByName(dev)
		if err != nil {
			return netip.Addr{}, false
		}
		*index = link.Attrs().Index
	}
	ip := addrOf(u.IP)
	return ip, u.LinkIndex == *index && ip.IsValid()
}

// subscribe opens the subscription socket inside the handle's
// namespace. The library enters the namespace on the calling thread for the
// socket() call; a fresh goroutine whose thread stays locked keeps that from
// ever touching a caller's thread.
func (h *Neighs) subscribe(ch chan netlink.NeighUpdate, done chan struct{}, onErr func(error)) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		opts := netlink.NeighSubscribeOptions{ErrorCallback: onErr, ReceiveBufferSize: 1 << 20}
		if h.ns != "" {
			ns, err := netns.GetFromPath(h.ns)
			if err != nil {
				errc <- fmt.Errorf("open network namespace %s: %w", h.ns, err)
				return
			}
			defer func() { _ = ns.Close() }()
			opts.Namespace = &ns
		}
		errc <- netlink.NeighSubscribeWithOptions(ch, done, opts)
	}()
	return <-errc
}

// firstError keeps the first error a subscription reports, from whichever
// goroutine reports it.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
