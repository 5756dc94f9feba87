package ops

import (
	"context"
	"errors"
	"fmt"
	"runtime"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// errLinkSubscriptionClosed reports a link or address subscription the
// kernel side ended without an error of its own.
var errLinkSubscriptionClosed = errors.New("subscription closed")

// WatchLinks subscribes to the link and address events of the network
// namespace at nsPath (empty: the process's own) and calls onChange, one
// call at a time, with the name of the link an event concerns: a link
// added, changed (up or down, renamed, a new MTU) or deleted (RTM_NEWLINK,
// RTM_DELLINK; a deleted link's name comes from the event), or an address
// of universe scope added to or removed from it. Addresses of narrower
// scope (IPv6 link-local ones, the underlay's enhanced addresses) are not
// reported: they are not the link's own addresses as Addrs.ByLink reads
// them. Existing links are not listed. ready, when not nil, is called once
// both subscriptions are open, before any onChange, so that the caller can
// make up for changes that came before.
//
// It returns nil when ctx ends and an error when a subscription cannot be
// opened, fails or ends (events may then have been lost); the caller
// subscribes again.
func WatchLinks(ctx context.Context, nsPath string, ready func(), onChange func(name string)) error {
	where := nsPath
	if where == "" {
		where = "the process's network namespace"
	}
	h, err := Open(nsPath)
	if err != nil {
		return fmt.Errorf("watch links in %s: %w", where, err)
	}
	defer h.Close()

	var subErr firstError
	onErr := subErr.set
	closed := func(what string) error {
		return fmt.Errorf("watch links in %s: %s %w", where, what, errors.Join(errLinkSubscriptionClosed, subErr.get()))
	}

	done := make(chan struct{})
	var drains []func()
	defer func() {
		close(done)
		for _, drain := range drains { // the library's readers end after their sockets close
			drain()
		}
	}()
	links := make(chan netlink.LinkUpdate, 256)
	err = subscribeIn(nsPath, func(ns *netns.NsHandle) error {
		return netlink.LinkSubscribeWithOptions(links, done, netlink.LinkSubscribeOptions{
			Namespace: ns, ErrorCallback: onErr, ReceiveBufferSize: 1 << 20})
	})
	if err != nil {
		return fmt.Errorf("watch links in %s: subscribe to links: %w", where, err)
	}
	drains = append(drains, func() {
		for range links {
		}
	})
	addrs := make(chan netlink.AddrUpdate, 256)
	err = subscribeIn(nsPath, func(ns *netns.NsHandle) error {
		return netlink.AddrSubscribeWithOptions(addrs, done, netlink.AddrSubscribeOptions{
			Namespace: ns, ErrorCallback: onErr, ReceiveBufferSize: 1 << 20})
	})
	if err != nil {
		return fmt.Errorf("watch links in %s: subscribe to addresses: %w", where, err)
	}
	drains = append(drains, func() {
		for range addrs {
		}
	})
	if ready != nil {
		ready()
	}

	names := map[int]string{} // link index -> name, from the link events
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-links:
			if !ok {
				return closed("link")
			}
			a := u.Attrs()
			if u.Header.Type == unix.RTM_DELLINK {
				delete(names, a.Index)
			} else {
				names[a.Index] = a.Name
			}
			onChange(a.Name)
		case u, ok := <-addrs:
			if !ok {
				return closed("address")
			}
			if u.Scope != unix.RT_SCOPE_UNIVERSE {
				continue
			}
			if name, ok := h.Links().name(names, u.LinkIndex); ok {
				onChange(name)
			}
		}
	}
}

// name resolves a link index to its name: from names, which the link
// events keep, else from the kernel. A link already gone is not found; its
// deletion is reported by its own link event.
func (h *Links) name(names map[int]string, index int) (string, bool) {
	if name, ok := names[index]; ok {
		return name, true
	}
	link, err := h.nl.LinkByIndex(index)
	if err != nil {
		return "", false
	}
	names[index] = link.Attrs().Name
	return link.Attrs().Name, true
}

// subscribeIn runs subscribe with the namespace at nsPath open (nil for the
// process's own). The library enters the namespace on the calling thread to
// open its socket; a fresh goroutine whose thread stays locked keeps that
// from ever touching a caller's thread, and the runtime ends the thread
// with the goroutine.
func subscribeIn(nsPath string, subscribe func(ns *netns.NsHandle) error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if nsPath == "" {
			errc <- subscribe(nil)
			return
		}
		ns, err := netns.GetFromPath(nsPath)
		if err != nil {
			errc <- fmt.Errorf("open network namespace %s: %w", nsPath, err)
			return
		}
		defer func() { _ = ns.Close() }()
		errc <- subscribe(&ns)
	}()
	return <-errc
}
