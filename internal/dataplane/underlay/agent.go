package underlay

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/estuary-cni/estuary/internal/dataplane"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/sysctl"
)

// podnetPrefix starts podnet's host veths and the overlay's devices: links
// of that name are never the underlay's unless they carry desired.VLANMarker.
const podnetPrefix = desired.DevicePrefix

// Agent applies the underlay data path to one node's network namespace.
// Apply and Remove calls run one at a time.
type Agent struct {
	hostNetns string
	h         *ops.Handle
	rec       *dataplane.Reconciler

	mu      sync.Mutex
	sysctls []sysctl.Setting
}

// NewAgent returns an agent for the node's network namespace at hostNetns
// (for example /proc/self/ns/net; empty means the process's own).
func NewAgent(hostNetns string) (*Agent, error) {
	h, err := ops.Open(hostNetns)
	if err != nil {
		return nil, fmt.Errorf("underlay agent: %w", err)
	}
	return &Agent{hostNetns: hostNetns, h: h, rec: dataplane.NewReconciler(h, Ownership())}, nil
}

// Close releases the agent's handle.
func (a *Agent) Close() { a.h.Close() }

// Applied returns the sysctls the last Apply wanted on its vlan-ifs (each
// written only if it differed).
func (a *Agent) Applied() []sysctl.Setting {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.sysctls)
}

// Apply brings the node's underlay data path to in: it ensures each vlan-if
// (a tagged one is created down, its sysctls written, then brought up),
// reconciles rules, tables, proxy neighbours and enhanced addresses under
// the underlay's ownership, deletes the kernel's local routes of enhanced
// addresses, and deletes the marked sub-interfaces no local subnet uses. A
// subnet whose vlan-if cannot be made is left out and reported; the others
// are applied. It returns the plan it carried out, the deleted local routes
// among its DelRoutes; a second Apply with the same input returns an empty
// plan.
func (a *Agent) Apply(ctx context.Context, in Input) (desired.Plan, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	errs := Problems(in)
	devs := Devices(in)
	failed := map[string]bool{}
	a.sysctls = nil
	for _, d := range devs {
		exists, err := a.ensureDevice(in.parentOf(d), d)
		if err != nil {
			errs = append(errs, err)
		}
		if !exists {
			failed[d.Name] = true
		}
	}
	use := without(in, failed)
	plan, err := a.reconcile(ctx, use)
	if err != nil {
		errs = append(errs, err)
	}
	if err := a.deleteUnused(devs); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return plan, fmt.Errorf("underlay on %s: %w", in.Uplink, err)
	}
	return plan, nil
}

// Remove takes the underlay off the node: it applies in without local
// pods, which deletes every rule, table, proxy entry and enhanced address
// the underlay owns and every marked sub-interface. in.Cluster tells which
// neighbours and addresses are the underlay's.
func (a *Agent) Remove(ctx context.Context, in Input) (desired.Plan, error) {
	in.Networks = nil
	return a.Apply(ctx, in)
}

// ensureDevice makes the vlan-if exist and writes its sysctls; a tagged
// sub-interface is brought up only after them, the uplink is used as it
// is. exists is false when there is no such link: the subnets on it are
// then left out. A failed setting is reported but keeps the link in use,
// so that a transient failure never takes routes away from running pods.
func (a *Agent) ensureDevice(uplink string, d Device) (exists bool, err error) {
	if d.VLAN == 0 {
		if _, err := a.h.Links().Get(d.Name); err != nil {
			return false, fmt.Errorf("uplink: %w", err)
		}
	} else if err := a.h.VLANs().Ensure(uplink, d.VLAN, d.Name); err != nil {
		return false, err
	}
	settings := Sysctls(d.Name, d.V4, d.V6)
	if d.V6 {
		// IPv6 forwarding on a link makes the kernel ignore its router
		// advertisements unless accept_ra is 2; keep a node that learns
		// its routes by RA on the uplink doing so.
		key := "net/ipv6/conf/" + d.Name + "/accept_ra"
		if v, err := sysctl.Read(a.hostNetns, key); err == nil && v == "1" {
			settings = append(settings, sysctl.Setting{Key: key, Value: "2"})
		}
	}
	a.sysctls = append(a.sysctls, settings...)
	if err := sysctl.Write(a.hostNetns, settings); err != nil {
		return true, fmt.Errorf("vlan-if %s: %w", d.Name, err)
	}
	if d.VLAN != 0 {
		if err := a.h.Links().SetUp(d.Name); err != nil {
			return true, fmt.Errorf("vlan-if %s: %w", d.Name, err)
		}
	}
	return true, nil
}

// Sysctls returns the per-link settings of a vlan-if carrying the given
// families: proxy replies without delay and forwarding (the kernel proxies
// only on a forwarding link); for IPv6 also proxy NDP.
func Sysctls(dev string, v4, v6 bool) []sysctl.Setting {
	var s []sysctl.Setting
	if v4 {
		s = append(s,
			sysctl.Setting{Key: "net/ipv4/neigh/" + dev + "/proxy_delay", Value: "0"},
			sysctl.Setting{Key: "net/ipv4/conf/" + dev + "/forwarding", Value: "1"},
		)
	}
	if v6 {
		s = append(s,
			sysctl.Setting{Key: "net/ipv6/neigh/" + dev + "/proxy_delay", Value: "0"},
			sysctl.Setting{Key: "net/ipv6/conf/" + dev + "/proxy_ndp", Value: "1"},
			sysctl.Setting{Key: "net/ipv6/conf/" + dev + "/forwarding", Value: "1"},
		)
	}
	return s
}

// without returns in minus the subnets whose vlan-if is in failed.
func without(in Input, failed map[string]bool) Input {
	if len(failed) == 0 {
		return in
	}
	out := in
	out.Networks = nil
	for _, n := range in.Networks {
		m := n
		m.Subnets = nil
		for _, s := range n.Subnets {
			if !failed[VLANName(in.uplinkOf(n), vlanOf(n, s))] {
				m.Subnets = append(m.Subnets, s)
			}
		}
		out.Networks = append(out.Networks, m)
	}
	return out
}

// deleteUnused deletes the marked sub-interfaces that are not in devs.
func (a *Agent) deleteUnused(devs []Device) error {
	vs, err := a.h.VLANs().List()
	if err != nil {
		return fmt.Errorf("list vlan links: %w", err)
	}
	var errs []error
	for _, v := range vs {
		used := slices.ContainsFunc(devs, func(d Device) bool { return d.Name == v.Name })
		if v.Marked && !used {
			errs = append(errs, a.h.VLANs().DeleteMarked(v.Name))
		}
	}
	return errors.Join(errs...)
}

// reconcile brings the kernel to Desired(in) with Hidden(in) absent,
// through the reconcile every writer shares (dataplane.Reconciler): the
// plan's order (desired.Plan.Steps) deletes a stale enhanced address before
// its successor is added, deletes the kernel's local route of each new one
// right after it, and adds on-link routes before the gateway routes that
// need them. The ownership is narrowed to what the input makes the
// underlay's (ownership), with the sub-interfaces estuary made listed after
// each read of the kernel. The returned plan lists the deleted local routes
// among its DelRoutes.
func (a *Agent) reconcile(ctx context.Context, in Input) (desired.Plan, error) {
	want := Desired(in)
	want.Absent = hiddenOf(want)
	var markedErr error
	plan, err := a.rec.ReconcileLive(ctx, func(own desired.Ownership, _ desired.State) (desired.State, desired.Ownership) {
		marked, err := a.marked()
		if err != nil {
			markedErr = err
			own.Skip = func(string) bool { return true }
			return desired.State{}, own
		}
		return want, ownership(own, in, marked)
	})
	return plan, errors.Join(markedErr, err)
}

// marked returns the names of the sub-interfaces estuary made.
func (a *Agent) marked() (map[string]bool, error) {
	vs, err := a.h.VLANs().List()
	if err != nil {
		return nil, fmt.Errorf("list vlan links: %w", err)
	}
	m := make(map[string]bool, len(vs))
	for _, v := range vs {
		if v.Marked {
			m[v.Name] = true
		}
	}
	return m, nil
}

// ownership narrows own to the neighbours and addresses the underlay may
// own (see the package design): proxy entries and enhanced addresses
// (IPv4, not link-local, scope link, noprefixroute) on a sub-interface
// estuary made, or inside one of the input's underlay subnets on any link
// but podnet's and the overlay's (named est*, unless marked).
func ownership(own desired.Ownership, in Input, marked map[string]bool) desired.Ownership {
	prefixes := underlayPrefixes(in)
	ours := func(dev string, ip netip.Addr) bool {
		if marked[dev] {
			return true
		}
		if strings.HasPrefix(dev, podnetPrefix) {
			return false
		}
		return slices.ContainsFunc(prefixes, func(p netip.Prefix) bool { return p.Contains(ip.Unmap()) })
	}
	own.Neighs = func(n desired.Neigh) bool { return n.Proxy && ours(n.Dev, n.IP) }
	own.Addrs = func(ad desired.Addr) bool {
		ip := ad.Prefix.Addr().Unmap()
		return ip.Is4() && !ip.IsLinkLocalUnicast() && ad.Scope == desired.ScopeLink && ad.NoPrefixRoute && ours(ad.Dev, ip)
	}
	return own
}
