package podnet

import (
	"errors"
	"fmt"
	"net/netip"

	"google.golang.org/protobuf/proto"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
	"github.com/estuary-cni/estuary/internal/sysctl"
	"github.com/estuary-cni/estuary/pkg/family"
)

// plumbing is one attachment's view of the host and pod namespaces.
type plumbing struct {
	a        cniserver.Attachment
	hostNS   string
	host     *ops.Handle
	pod      *ops.Handle
	hostVeth string
	mtu      int
	mac      state.MAC // the pod side's pinned MAC; zero: the kernel's choice
}

// open binds handles to the pod's namespace (first, so a missing namespace
// fails before anything is made) and to the host's.
func (b *Backend) open(a cniserver.Attachment, mtu int) (*plumbing, error) {
	pod, err := ops.Open(a.Netns)
	if err != nil {
		return nil, cniserver.WithReason(cniserver.ReasonNetns, fmt.Errorf("%s: pod namespace: %w", podRef(a), err))
	}
	host, err := ops.Open(b.cfg.HostNetns)
	if err != nil {
		pod.Close()
		return nil, cniserver.WithReason(cniserver.ReasonDataplane, fmt.Errorf("%s: host namespace: %w", podRef(a), err))
	}
	return &plumbing{a: a, hostNS: b.cfg.HostNetns, host: host, pod: pod, hostVeth: HostVethName(a), mtu: mtu}, nil
}

func (p *plumbing) close() {
	p.pod.Close()
	p.host.Close()
}

func (p *plumbing) errorf(format string, args ...any) error {
	return fmt.Errorf("%s: "+format, append([]any{podRef(p.a)}, args...)...)
}

// ensureVeth creates the pair, or accepts an existing one that joins this
// attachment's host side and pod interface (and gives it the pinned MAC).
// created says whether it made it.
func (p *plumbing) ensureVeth() (created bool, err error) {
	hl, err := p.host.Links().Get(p.hostVeth)
	if errors.Is(err, ops.ErrLinkNotFound) {
		if err := p.host.Devices().AddVethPeerIn(p.hostVeth, HostMAC.HardwareAddr(), p.a.IfName, p.peerMAC(), p.a.Netns,
			p.mtu); err != nil {
			return false, p.errorf("%w", err)
		}
		if err := p.host.Links().SetAlias(p.hostVeth, endpointAlias(p.a, p.mac)); err != nil {
			return true, p.errorf("%w", err)
		}
		return true, nil
	}
	if err != nil {
		return false, p.errorf("%w", err)
	}
	pl, err := p.pod.Links().Get(p.a.IfName)
	if err != nil || hl.Type != "veth" || pl.Type != "veth" || hl.PeerIndex != pl.Index || pl.PeerIndex != hl.Index {
		return false, p.errorf("host link %s exists but is not paired with %s in %s; left alone", p.hostVeth,
			p.a.IfName, p.a.Netns)
	}
	if err := p.pin(pl); err != nil {
		return false, err
	}
	if want := endpointAlias(p.a, p.mac); hl.Alias != want {
		if err := p.host.Links().SetAlias(p.hostVeth, want); err != nil {
			return false, p.errorf("%w", err)
		}
	}
	return false, nil
}

// configure writes everything but the pair itself. Per-link sysctls go
// first, while both ends are down, so no packet sees them unset.
func (p *plumbing) configure(addrs []Address) error {
	v6 := hasFamily(addrs, family.IPv6)
	if v6 {
		if err := p.keepRAs(); err != nil {
			return p.errorf("host namespace: %w", err)
		}
	}
	if err := sysctl.Write(p.hostNS, p.hostSysctls(v6)); err != nil {
		return p.errorf("host side %s: %w", p.hostVeth, err)
	}
	if v6 {
		if err := sysctl.Write(p.a.Netns, p.podSysctls()); err != nil {
			return p.errorf("pod side %s: %w", p.a.IfName, err)
		}
	}
	for _, up := range []struct {
		h    *ops.Handle
		name string
	}{{p.host, p.hostVeth}, {p.pod, "lo"}, {p.pod, p.a.IfName}} {
		if err := up.h.Links().SetUp(up.name); err != nil {
			return p.errorf("%w", err)
		}
	}
	if err := p.configurePod(addrs); err != nil {
		return err
	}
	if err := p.host.Apply(p.hostPlan(addrs)); err != nil {
		return p.errorf("host side %s: %w", p.hostVeth, err)
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
	return []sysctl.Setting{{Key: "net/ipv6/conf/" + p.a.IfName + "/accept_dad", Value: "0"}}
}

// configurePod writes the pod's addresses, the permanent neighbour for each
// family's gateway and the onlink default routes.
func (p *plumbing) configurePod(addrs []Address) error {
	var plan state.Plan
	for _, ad := range addrs {
		plan.AddAddrs = append(plan.AddAddrs, state.Addr{Dev: p.a.IfName, Prefix: hostPrefix(ad.IP.Addr())})
	}
	for _, f := range families(addrs) {
		plan.AddNeighs = append(plan.AddNeighs, state.Neigh{Dev: p.a.IfName, IP: gatewayOf(f), MAC: HostMAC, Permanent: true})
	}
	if err := p.pod.Apply(plan); err != nil {
		return p.errorf("pod side %s: %w", p.a.IfName, err)
	}
	for _, r := range p.podRoutes(addrs) {
		if err := p.pod.Routes().AddOnlink(r); err != nil {
			return p.errorf("pod side %s: %w", p.a.IfName, err)
		}
	}
	return nil
}

func (p *plumbing) podRoutes(addrs []Address) []state.Route {
	var rs []state.Route
	for _, f := range families(addrs) {
		dst := "0.0.0.0/0"
		if f == family.IPv6 {
			dst = "::/0"
		}
		rs = append(rs, state.Route{
			Table: state.MainTable, Dst: mustPrefix(dst), Gw: gatewayOf(f), Dev: p.a.IfName,
			Protocol: state.ProtocolEstuary,
		})
	}
	return rs
}

// hostPlan: the local-pods routes, the IPv6 gateway's proxy entry and the
// shared rule per family (applied last by Apply).
func (p *plumbing) hostPlan(addrs []Address) state.Plan {
	var plan state.Plan
	for _, ad := range addrs {
		plan.AddRoutes = append(plan.AddRoutes, p.hostRoute(ad.IP.Addr()))
	}
	for _, f := range families(addrs) {
		if f == family.IPv6 {
			plan.AddNeighs = append(plan.AddNeighs, state.Neigh{Dev: p.hostVeth, IP: GatewayIPv6, Proxy: true})
		}
		plan.AddRules = append(plan.AddRules, localPodsRule(f))
	}
	return plan
}

func (p *plumbing) hostRoute(a netip.Addr) state.Route { return localRoute(p.hostVeth, a) }

// localRoute is a's route in the local-pods table, through the host veth dev.
func localRoute(dev string, a netip.Addr) state.Route {
	return state.Route{
		Table: state.TableLocalPods, Dst: hostPrefix(a), Dev: dev, Scope: state.ScopeLink,
		Protocol: state.ProtocolEstuary,
	}
}

func localPodsRule(f family.Family) state.Rule {
	return state.Rule{Priority: state.PriorityLocalPods, Table: state.TableLocalPods, Family: f}
}

// reply reads both ends' MACs back and reports the interface in CNI terms:
// each address as the pod holds it (/32, /128) with the link-local gateway.
func (p *plumbing) reply(addrs []Address) (*cniv1.AddReply, error) {
	hl, err := p.host.Links().Get(p.hostVeth)
	if err != nil {
		return nil, p.errorf("%w", err)
	}
	pl, err := p.pod.Links().Get(p.a.IfName)
	if err != nil {
		return nil, p.errorf("%w", err)
	}
	r := &cniv1.AddReply{Interfaces: []*cniv1.Interface{
		{Name: hl.Name, Mac: macString(hl.MAC), Mtu: uint32(p.mtu)},
		{Name: pl.Name, Mac: macString(pl.MAC), Mtu: uint32(p.mtu), Sandbox: p.a.Netns},
	}}
	for _, ad := range addrs {
		r.Ips = append(r.Ips, &cniv1.IPConfig{
			Interface: proto.Int32(1),
			Address:   hostPrefix(ad.IP.Addr()).String(),
			Gateway:   gatewayOf(family.Of(ad.IP.Addr())).String(),
		})
	}
	for _, rt := range p.podRoutes(addrs) {
		r.Routes = append(r.Routes, &cniv1.Route{Dst: rt.Dst.String(), Gw: rt.Gw.String()})
	}
	return r, nil
}

func hasFamily(addrs []Address, f family.Family) bool {
	for _, a := range addrs {
		if family.Of(a.IP.Addr()) == f {
			return true
		}
	}
	return false
}

// families lists the address families present, IPv4 first.
func families(addrs []Address) []family.Family {
	var fs []family.Family
	for _, f := range []family.Family{family.IPv4, family.IPv6} {
		if hasFamily(addrs, f) {
			fs = append(fs, f)
		}
	}
	return fs
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }
