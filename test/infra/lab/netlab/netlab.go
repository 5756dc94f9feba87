// Package netlab owns the lab's network plumbing: named network namespaces, the veth
// links between them, addresses, routes, sysctls and kernel capability probes.
//
// Design: nothing here ever switches the calling goroutine's OS thread into another
// namespace. Links, addresses and routes go through netlink handles opened inside
// the target namespace; the few operations that need the thread itself inside a
// namespace (creating one, writing its /proc/sys) run in a fresh goroutine locked
// to its OS thread, and that goroutine exits while still locked so the Go runtime
// throws the thread away instead of reusing it with a foreign namespace.
package netlab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NSDir is where named network namespaces are pinned (shared with `ip netns`).
const NSDir = "/var/run/netns"

// Path returns the pin path of the named namespace.
func Path(name string) string { return filepath.Join(NSDir, name) }

// Create makes the named namespace (an existing one is kept) and brings up its loopback.
func Create(name string) error {
	if _, err := os.Stat(Path(name)); err == nil {
		return LinkUp(name, "lo")
	}
	if err := nsrun.SharedDir(NSDir); err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread is now in the new namespace
		h, err := netns.NewNamed(name)
		if err != nil {
			errc <- fmt.Errorf("create netns %s: %w", name, err)
			return
		}
		_ = h.Close()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		return err
	}
	return LinkUp(name, "lo")
}

// Delete removes the named namespace; a missing one is not an error.
func Delete(name string) error {
	if _, err := os.Stat(Path(name)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := netns.DeleteNamed(name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete netns %s: %w", name, err)
	}
	return nil
}

// List returns the names of pinned namespaces that start with prefix.
func List(prefix string) ([]string, error) {
	ents, err := os.ReadDir(NSDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", NSDir, err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// handle opens a netlink handle inside the named namespace.
func handle(ns string) (*netlink.Handle, error) {
	nh, err := netns.GetFromName(ns)
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", ns, err)
	}
	defer func() { _ = nh.Close() }()
	h, err := netlink.NewHandleAt(nh)
	if err != nil {
		return nil, fmt.Errorf("netlink handle in %s: %w", ns, err)
	}
	return h, nil
}

// LinkUp sets a link up inside ns.
func LinkUp(ns, link string) error {
	h, err := handle(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(link)
	if err != nil {
		return fmt.Errorf("find %s in %s: %w", link, ns, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up in %s: %w", link, ns, err)
	}
	return nil
}

// Bridge creates (or keeps) a bridge named br inside ns and sets it up.
func Bridge(ns, br string) error {
	h, err := handle(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	if _, err := h.LinkByName(br); err != nil {
		b := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: br, MTU: 1500}}
		if err := h.LinkAdd(b); err != nil {
			return fmt.Errorf("add bridge %s in %s: %w", br, ns, err)
		}
	}
	return LinkUp(ns, br)
}

// Veth connects namespace a (end named aName) with namespace b (end named bName).
// When master is not empty, a's end is enslaved to that bridge in a. Existing ends
// are replaced.
func Veth(a, aName, master, b, bName string) error {
	ha, err := handle(a)
	if err != nil {
		return err
	}
	defer ha.Close()
	if old, err := ha.LinkByName(aName); err == nil {
		if err := ha.LinkDel(old); err != nil {
			return fmt.Errorf("remove stale %s in %s: %w", aName, a, err)
		}
	}
	nb, err := netns.GetFromName(b)
	if err != nil {
		return fmt.Errorf("open netns %s: %w", b, err)
	}
	defer func() { _ = nb.Close() }()
	v := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: aName, MTU: 1500},
		PeerName:      bName,
		PeerNamespace: netlink.NsFd(int(nb)),
	}
	if err := ha.LinkAdd(v); err != nil {
		return fmt.Errorf("add veth %s(%s) <-> %s(%s): %w", aName, a, bName, b, err)
	}
	l, err := ha.LinkByName(aName)
	if err != nil {
		return fmt.Errorf("find %s in %s: %w", aName, a, err)
	}
	if master != "" {
		br, err := ha.LinkByName(master)
		if err != nil {
			return fmt.Errorf("find bridge %s in %s: %w", master, a, err)
		}
		if err := ha.LinkSetMaster(l, br); err != nil {
			return fmt.Errorf("attach %s to %s in %s: %w", aName, master, a, err)
		}
	}
	if err := ha.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up in %s: %w", aName, a, err)
	}
	return LinkUp(b, bName)
}

// AddAddr assigns addr/bits to link inside ns (idempotent).
func AddAddr(ns, link string, addr netip.Prefix) error {
	h, err := handle(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(link)
	if err != nil {
		return fmt.Errorf("find %s in %s: %w", link, ns, err)
	}
	a := &netlink.Addr{IPNet: ipnet(addr)}
	if addr.Addr().Is6() {
		// Every lab address is the lab's own: no duplicate address
		// detection, so it is usable (a route's source) at once.
		a.Flags = unix.IFA_F_NODAD
	}
	if err := h.AddrReplace(l, a); err != nil {
		return fmt.Errorf("add %s to %s in %s: %w", addr, link, ns, err)
	}
	return nil
}

// Route installs dst via gw inside ns (replacing any route to dst). An invalid dst
// means the default route.
func Route(ns string, dst netip.Prefix, gw netip.Addr) error {
	h, err := handle(ns)
	if err != nil {
		return err
	}
	defer h.Close()
	r := &netlink.Route{Gw: net.IP(gw.AsSlice())}
	switch {
	case dst.IsValid():
		r.Dst = ipnet(dst)
	case gw.Is6():
		r.Dst = &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	default:
		r.Dst = &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}
	}
	if err := h.RouteReplace(r); err != nil {
		return fmt.Errorf("route %s via %s in %s: %w", r.Dst, gw, ns, err)
	}
	return nil
}

// Sysctl writes value to /proc/sys/<key> (dots or slashes) inside ns.
func Sysctl(ns, key, value string) error {
	p := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
	return nsrun.Do(Path(ns), func() error {
		if err := os.WriteFile(p, []byte(value), 0o600); err != nil {
			return fmt.Errorf("sysctl %s=%s in %s: %w", key, value, ns, err)
		}
		return nil
	})
}

func ipnet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Nft loads an nftables ruleset (nft -f syntax) inside ns.
func Nft(ns, ruleset string) error {
	cmd := exec.Command("nsenter", "--net="+Path(ns), "nft", "-f", "-") //nolint:gosec // G204: the lab's own namespace and rules
	cmd.Stdin = strings.NewReader(ruleset)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft in %s: %w: %s", ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}
