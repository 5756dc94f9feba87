package podnet

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/sysctl"
	"github.com/estuary-cni/estuary/pkg/family"
)

// plumbing is one Spec's view of the host and pod namespaces.
type plumbing struct {
	s        Spec
	hostNS   string
	host     *ops.Handle
	pod      *ops.Handle
	hostVeth string
}

// open binds handles to the pod's namespace (first, so a missing namespace
// fails before anything is made) and to the host's.
func (h *Plumber) open(s Spec) (*plumbing, error) {
	pod, err := ops.Open(s.Netns)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPodNetns, err)
	}
	host, err := ops.Open(h.hostNetns)
	if err != nil {
		pod.Close()
		return nil, fmt.Errorf("host namespace: %w", err)
	}
	return &plumbing{s: s, hostNS: h.hostNetns, host: host, pod: pod, hostVeth: s.HostVeth()}, nil
}

func (p *plumbing) close() {
	p.pod.Close()
	p.host.Close()
}

// ensureVeth creates the pair, or accepts an existing one that joins this
// attachment's host side and pod interface (and gives it the pinned MAC).
// created says whether it made it.
func (p *plumbing) ensureVeth() (created bool, err error) {
	hl, err := p.host.Links().Get(p.hostVeth)
	if errors.Is(err, ops.ErrLinkNotFound) {
		if err := p.host.Devices().AddVethPeerIn(p.hostVeth, HostMAC.HardwareAddr(), p.s.IfName, p.peerMAC(), p.s.Netns,
			p.s.MTU); err != nil {
			return false, err
		}
		if err := p.host.Links().SetAlias(p.hostVeth, endpointAlias(p.s)); err != nil {
			return true, err
		}
		return true, nil
	}
	if err != nil {
		return false, err
	}
	pl, err := p.pod.Links().Get(p.s.IfName)
	if err != nil || hl.Type != "veth" || pl.Type != "veth" || hl.PeerIndex != pl.Index || pl.PeerIndex != hl.Index {
		return false, fmt.Errorf("host link %s exists but is not paired with %s in %s; left alone", p.hostVeth,
			p.s.IfName, p.s.Netns)
	}
	if err := p.pin(pl); err != nil {
		return false, err
	}
	if want := endpointAlias(p.s); hl.Alias != want {
		if err := p.host.Links().SetAlias(p.hostVeth, want); err != nil {
			return false, err
		}
	}
	return false, nil
}

// configure writes everything but the pair itself. Per-link sysctls go
// first, while both ends are down, so no packet sees them unset.
func (p *plumbing) configure() error {
	v6 := hasFamily(p.s.IPs, family.IPv6)
	if v6 {
		if err := p.keepRAs(); err != nil {
			return fmt.Errorf("host namespace: %w", err)
		}
	}
	if err := sysctl.Write(p.hostNS, p.hostSysctls(v6)); err != nil {
		return fmt.Errorf("host side %s: %w", p.hostVeth, err)
	}
	if v6 {
		if err := sysctl.Write(p.s.Netns, p.podSysctls()); err != nil {
			return fmt.Errorf("pod side %s: %w", p.s.IfName, err)
		}
	}
	for _, up := range []struct {
		h    *ops.Handle
		name string
	}{{p.host, p.hostVeth}, {p.pod, "lo"}, {p.pod, p.s.IfName}} {
		if err := up.h.Links().SetUp(up.name); err != nil {
			return err
		}
	}
	if err := p.configurePod(); err != nil {
		return err
	}
	if err := p.host.Apply(p.hostPlan()); err != nil {
		return fmt.Errorf("host side %s: %w", p.hostVeth, err)
	}
	return nil
}

// hostSysctls: proxy ARP/NDP and forwarding on the host side, and forwarding
// for the namespace (the reference ptp plugin's convention). IPv6 DAD is off
// on the host side so its link-local gateway address is usable at once.
// Whatever the pod's families, the host side takes no router advertisement
// (accept_ra 0) wherever the kernel has IPv6: else a pod could give the node
// a default route through itself (CVE-2020-10749), on a node whose IPv6
// forwarding is off.
func (p *plumbing) hostSysctls(v6 bool) []sysctl.Setting {
	dev := p.hostVeth
	var s []sysctl.Setting
	if v6 || kernelIPv6() {
		s = append(s, sysctl.Setting{Key: "net/ipv6/conf/" + dev + "/accept_ra", Value: "0"})
	}
	s = append(s,
		sysctl.Setting{Key: "net/ipv4/ip_forward", Value: "1"},
		sysctl.Setting{Key: "net/ipv4/conf/" + dev + "/forwarding", Value: "1"},
		sysctl.Setting{Key: "net/ipv4/conf/" + dev + "/proxy_arp", Value: "1"},
	)
	if v6 {
		s = append(s,
			sysctl.Setting{Key: "net/ipv6/conf/all/forwarding", Value: "1"},
			sysctl.Setting{Key: "net/ipv6/conf/" + dev + "/accept_dad", Value: "0"},
			sysctl.Setting{Key: "net/ipv6/conf/" + dev + "/forwarding", Value: "1"},
			sysctl.Setting{Key: "net/ipv6/conf/" + dev + "/proxy_ndp", Value: "1"},
		)
	}
	return s
}

// podSysctls: no DAD on the pod side, so its address works at once (it is a
// /128 on a point-to-point link: nothing else can hold it).
func (p *plumbing) podSysctls() []sysctl.Setting {
	return []sysctl.Setting{{Key: "net/ipv6/conf/" + p.s.IfName + "/accept_dad", Value: "0"}}
}

// configurePod writes the pod's addresses, the permanent neighbour for each
// family's gateway and the onlink default routes.
func (p *plumbing) configurePod() error {
	var plan desired.Plan
	for _, ip := range p.s.IPs {
		plan.AddAddrs = append(plan.AddAddrs, desired.Addr{Dev: p.s.IfName, Prefix: hostPrefix(ip)})
	}
	for _, f := range families(p.s.IPs) {
		plan.AddNeighs = append(plan.AddNeighs, desired.Neigh{Dev: p.s.IfName, IP: gatewayOf(f), MAC: HostMAC, Permanent: true})
	}
	if err := p.pod.Apply(plan); err != nil {
		return fmt.Errorf("pod side %s: %w", p.s.IfName, err)
	}
	for _, r := range p.podRoutes() {
		if err := p.pod.Routes().AddOnlink(r); err != nil {
			return fmt.Errorf("pod side %s: %w", p.s.IfName, err)
		}
	}
	return nil
}

func (p *plumbing) podRoutes() []desired.Route {
	var rs []desired.Route
	for _, f := range families(p.s.IPs) {
		dst := "0.0.0.0/0"
		if f == family.IPv6 {
			dst = "::/0"
		}
		rs = append(rs, desired.Route{
			Table: desired.MainTable, Dst: mustPrefix(dst), Gw: gatewayOf(f), Dev: p.s.IfName,
			Protocol: desired.ProtocolEstuary,
		})
	}
	return rs
}

// hostPlan: the local-pods routes, the IPv6 gateway's proxy entry and the
// shared rule per family (applied last by Apply).
func (p *plumbing) hostPlan() desired.Plan {
	var plan desired.Plan
	for _, ip := range p.s.IPs {
		plan.AddRoutes = append(plan.AddRoutes, p.hostRoute(ip))
	}
	for _, f := range families(p.s.IPs) {
		if f == family.IPv6 {
			plan.AddNeighs = append(plan.AddNeighs, desired.Neigh{Dev: p.hostVeth, IP: GatewayIPv6, Proxy: true})
		}
		plan.AddRules = append(plan.AddRules, localPodsRule(f))
	}
	return plan
}

func (p *plumbing) hostRoute(a netip.Addr) desired.Route { return localRoute(p.hostVeth, a) }

// localRoute is a's route in the local-pods table, through the host veth dev.
func localRoute(dev string, a netip.Addr) desired.Route {
	return desired.Route{
		Table: desired.TableLocalPods, Dst: hostPrefix(a), Dev: dev, Scope: desired.ScopeLink,
		Protocol: desired.ProtocolEstuary,
	}
}

func localPodsRule(f family.Family) desired.Rule {
	return desired.Rule{Priority: desired.PriorityLocalPods, Table: desired.TableLocalPods, Family: f}
}

func hasFamily(ips []netip.Addr, f family.Family) bool {
	for _, a := range ips {
		if family.Of(a) == f {
			return true
		}
	}
	return false
}

// families lists the address families present, IPv4 first.
func families(ips []netip.Addr) []family.Family {
	var fs []family.Family
	for _, f := range []family.Family{family.IPv4, family.IPv6} {
		if hasFamily(ips, f) {
			fs = append(fs, f)
		}
	}
	return fs
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
