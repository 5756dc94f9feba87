package podnet

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
	"github.com/estuary-cni/estuary/pkg/family"
)

// check lists what of the attachment is missing in the kernel: the pod
// interface (with its pinned MAC, if any) and its addresses, gateway
// neighbours and default routes, the host side, its local-pods routes and
// the shared rule.
func (p *plumbing) check(ips []netip.Prefix) []error {
	errs, stop := p.checkLinks()
	if stop {
		return errs
	}
	missing := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf(format+" missing", args...))
	}
	podState, err := p.pod.Read(ops.Scope{})
	if err != nil {
		return append(errs, fmt.Errorf("read pod namespace %s: %w", p.a.Netns, err))
	}
	hostState, err := p.host.Read(ops.Scope{})
	if err != nil {
		return append(errs, fmt.Errorf("read host namespace: %w", err))
	}
	addrs := make([]Address, 0, len(ips))
	for _, ip := range ips {
		addrs = append(addrs, Address{IP: ip, Family: family.Of(ip.Addr())})
		if !p.hasAddr(podState, ip.Addr()) {
			missing("address %s on %s", hostPrefix(ip.Addr()), p.a.IfName)
		}
		if r := p.hostRoute(ip.Addr()); !hasRoute(hostState, r) {
			missing("route %s", r)
		}
	}
	for _, r := range p.podRoutes(addrs) {
		if !hasRoute(podState, r) {
			missing("pod route %s", r)
		}
	}
	for _, f := range families(addrs) {
		n := state.Neigh{Dev: p.a.IfName, IP: gatewayOf(f), MAC: HostMAC, Permanent: true}
		if !slices.Contains(podState.Neighs, n) {
			missing("pod %s", n)
		}
		if r := localPodsRule(f).Canonical(); !slices.ContainsFunc(hostState.Rules, func(k state.Rule) bool {
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
	pl, err := p.pod.Links().Get(p.a.IfName)
	if err != nil {
		return []error{fmt.Errorf("interface %s in %s missing", p.a.IfName, p.a.Netns)}, true
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

func (p *plumbing) hasAddr(s state.State, a netip.Addr) bool {
	return slices.ContainsFunc(s.Addrs, func(k state.Addr) bool {
		return k.Dev == p.a.IfName && k.Prefix.Addr() == a && k.Prefix.Bits() == a.BitLen()
	})
}

// hasRoute matches a route by table, destination, device and gateway.
func hasRoute(s state.State, want state.Route) bool {
	want = want.Canonical()
	return slices.ContainsFunc(s.Routes, func(r state.Route) bool {
		r = r.Canonical()
		return r.Key() == want.Key() && r.Dev == want.Dev && r.Gw == want.Gw
	})
}
