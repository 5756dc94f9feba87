package podnet

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
)

// Mismatch lists what of a Spec's interface is missing in the kernel.
type Mismatch struct {
	Missing []error
}

func (m *Mismatch) Error() string { return errors.Join(m.Missing...).Error() }

// Unwrap returns the missing objects' errors.
func (m *Mismatch) Unwrap() []error { return m.Missing }

// Check verifies the Spec's interface against the kernel: the pod interface
// (with the MAC its host side's alias records as pinned, if any) and its
// addresses (Spec.IPs), gateway neighbours and default routes, the host
// side, its local-pods routes and the shared rule. What is missing comes as
// a *Mismatch; a failure to open the pod's namespace is ErrPodNetns.
// Spec.MAC and Spec.MTU are not read.
func (h *Plumber) Check(s Spec) error {
	p, err := h.open(s)
	if err != nil {
		return err
	}
	defer p.close()
	if errs := p.check(); len(errs) > 0 {
		return &Mismatch{Missing: errs}
	}
	return nil
}

func (p *plumbing) check() []error {
	errs, stop := p.checkLinks()
	if stop {
		return errs
	}
	missing := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format+" missing", args...))
	}
	podState, err := p.pod.Read(ops.Scope{})
	if err != nil {
		return append(errs, fmt.Errorf("read pod namespace %s: %w", p.s.Netns, err))
	}
	hostState, err := p.host.Read(ops.Scope{})
	if err != nil {
		return append(errs, fmt.Errorf("read host namespace: %w", err))
	}
	for _, ip := range p.s.IPs {
		if !p.hasAddr(podState, ip) {
			missing("address %s on %s", hostPrefix(ip), p.s.IfName)
		}
		if r := p.hostRoute(ip); !hasRoute(hostState, r) {
			missing("route %s", r)
		}
	}
	for _, r := range p.podRoutes() {
		if !hasRoute(podState, r) {
			missing("pod route %s", r)
		}
	}
	for _, f := range families(p.s.IPs) {
		n := desired.Neigh{Dev: p.s.IfName, IP: gatewayOf(f), MAC: HostMAC, Permanent: true}
		if !slices.Contains(podState.Neighs, n) {
			missing("pod %s", n)
		}
		if r := localPodsRule(f).Canonical(); !slices.ContainsFunc(hostState.Rules, func(k desired.Rule) bool {
			return k.Canonical() == r
		}) {
			missing("host %s", r)
		}
	}
	return errs
}

// checkLinks checks both ends of the pair and the pod side's pinned MAC;
// stop says that an end is missing, so nothing more can be checked.
func (p *plumbing) checkLinks() (errs []error, stop bool) {
	pl, err := p.pod.Links().Get(p.s.IfName)
	if err != nil {
		return []error{fmt.Errorf("interface %s in %s missing", p.s.IfName, p.s.Netns)}, true
	}
	hl, err := p.host.Links().Get(p.hostVeth)
	if err != nil {
		return []error{fmt.Errorf("host link %s missing", p.hostVeth)}, true
	}
	if err := p.checkMAC(pl, hl); err != nil {
		return []error{err}, false
	}
	return nil, false
}

func (p *plumbing) hasAddr(s desired.State, a netip.Addr) bool {
	return slices.ContainsFunc(s.Addrs, func(k desired.Addr) bool {
		return k.Dev == p.s.IfName && k.Prefix.Addr() == a && k.Prefix.Bits() == a.BitLen()
	})
}

// hasRoute matches a route by table, destination, device and gateway.
func hasRoute(s desired.State, want desired.Route) bool {
	want = want.Canonical()
	return slices.ContainsFunc(s.Routes, func(r desired.Route) bool {
		r = r.Canonical()
		return r.Key() == want.Key() && r.Dev == want.Dev && r.Gw == want.Gw
	})
}
