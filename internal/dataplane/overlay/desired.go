package overlay

import (
	"net/netip"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/pkg/family"
)

// Desired computes the kernel state and the NAT the overlay wants on a node.
// It is pure: equal inputs give equal outputs, and nothing is read.
func Desired(in Input) (desired.State, desired.NAT) {
	var s desired.State
	fams := subnetFamilies(in.Subnets)
	for _, sn := range in.Subnets {
		if !sn.CIDR.IsValid() {
			continue
		}
		s.Routes = append(s.Routes, onDevice(desired.TableOverlaySubnets, sn.CIDR.Masked(), in.Device))
		s.Rules = append(s.Rules, desired.Rule{Priority: desired.PriorityOverlayNodes, Table: desired.TableOverlayNodes, Src: sn.CIDR.Masked()})
	}
	for _, f := range []family.Family{family.IPv4, family.IPv6} {
		if fams[f] {
			s.Rules = append(s.Rules, desired.Rule{Priority: desired.PriorityOverlaySubnets, Table: desired.TableOverlaySubnets, Family: f})
		}
	}
	for _, r := range remotes(in) {
		for _, ip := range r.NodeIPs {
			if ip = ip.Unmap(); ip.IsValid() && fams[family.Of(ip)] {
				s.Routes = append(s.Routes, onDevice(desired.TableOverlayNodes, netip.PrefixFrom(ip, ip.BitLen()), in.Device))
			}
		}
		if !in.NoFlood {
			s.FDB = append(s.FDB, desired.FDB{Dev: in.Device, Dst: r.VTEP})
		}
		if !r.MAC.IsZero() {
			s.FDB = append(s.FDB, desired.FDB{Dev: in.Device, MAC: r.MAC, Dst: r.VTEP})
		}
	}
	s.Routes = append(s.Routes, underlayRoutes(in, fams, s.Routes)...)
	for _, p := range in.LocalPods {
		if p.IsValid() {
			s.Neighs = append(s.Neighs, desired.Neigh{Dev: in.Device, IP: p.Unmap(), Proxy: true})
		}
	}
	for _, ip := range in.NodeIPs {
		if ip.IsValid() && family.Of(ip.Unmap()) == family.IPv6 && fams[family.IPv6] {
			s.Neighs = append(s.Neighs, desired.Neigh{Dev: in.Device, IP: ip, Proxy: true})
		}
	}
	return s, desiredNAT(in)
}

// remotes returns the valid remotes other than this node whose VTEP is of
// the family of this node's (LocalIP): a VXLAN device sends over one
// family, and the kernel refuses an FDB entry of the other (a node whose
// tunnel runs over the other family is unreachable through the overlay;
// translate.BuildInput reports it).
func remotes(in Input) []Remote {
	var out []Remote
	local := in.LocalIP.Unmap()
	for _, r := range in.Remotes {
		if vtep := r.VTEP.Unmap(); vtep.IsValid() && vtep != local && (!local.IsValid() || vtep.Is4() == local.Is4()) {
			r.VTEP = r.VTEP.Unmap()
			out = append(out, r)
		}
	}
	return out
}

// underlayRoutes sends the underlay subnets of the overlay's families into
// the tunnel for overlay sources (table 1002), each gateway inside its
// subnet thrown back to the node's own routing. Destinations table 1002
// already holds (have: a node's address) and repeated CIDRs are skipped.
func underlayRoutes(in Input, fams map[family.Family]bool, have []desired.Route) []desired.Route {
	seen := map[desired.RouteKey]bool{}
	for _, r := range have {
		seen[r.Key()] = true
	}
	var out []desired.Route
	add := func(r desired.Route) {
		if !seen[r.Key()] {
			seen[r.Key()] = true
			out = append(out, r)
		}
	}
	for _, u := range in.Underlays {
		if !u.CIDR.IsValid() || !fams[family.Of(u.CIDR.Addr().Unmap())] {
			continue
		}
		cidr := netip.PrefixFrom(u.CIDR.Addr().Unmap(), u.CIDR.Bits()).Masked()
		add(onDevice(desired.TableOverlayNodes, cidr, in.Device))
		if gw := u.Gateway.Unmap(); gw.IsValid() && cidr.Contains(gw) {
			add(desired.Route{Table: desired.TableOverlayNodes, Dst: netip.PrefixFrom(gw, gw.BitLen()), Type: desired.RouteThrow,
				Protocol: desired.ProtocolEstuary})
		}
	}
	return out
}

func onDevice(table int, dst netip.Prefix, dev string) desired.Route {
	return desired.Route{Table: table, Dst: dst, Dev: dev, Scope: desired.ScopeLink, Protocol: desired.ProtocolEstuary}
}

// desiredNAT masquerades, per family, the NATOutgoing overlay subnets and
// the natOutgoing underlay subnets (UnderlayNAT) towards every destination
// outside the cluster's prefixes and those subnets, unless the packet leaves
// through the tunnel or carries kube-proxy's masquerade mark.
func desiredNAT(in Input) desired.NAT {
	var n desired.NAT
	for _, f := range []family.Family{family.IPv4, family.IPv6} {
		var nf desired.NATFamily
		for _, sn := range in.Subnets {
			if !sn.CIDR.IsValid() || family.Of(sn.CIDR.Addr().Unmap()) != f {
				continue
			}
			nf.Exempt = append(nf.Exempt, sn.CIDR)
			if sn.NATOutgoing {
				nf.Sources = append(nf.Sources, sn.CIDR)
			}
		}
		for _, p := range in.ClusterPrefixes {
			if p.IsValid() && family.Of(p.Addr().Unmap()) == f {
				nf.Exempt = append(nf.Exempt, p)
			}
		}
		for _, p := range in.UnderlayNAT {
			if p.IsValid() && family.Of(p.Addr().Unmap()) == f {
				nf.Sources = append(nf.Sources, p)
				nf.Exempt = append(nf.Exempt, p)
			}
		}
		nf.Device, nf.SkipMark = in.Device, in.KubeProxyMark
		nf = nf.Canonical()
		if f == family.IPv6 {
			n.IPv6 = nf
		} else {
			n.IPv4 = nf
		}
	}
	return n
}

func subnetFamilies(sns []Subnet) map[family.Family]bool {
	fams := map[family.Family]bool{}
	for _, sn := range sns {
		if sn.CIDR.IsValid() {
			fams[family.Of(sn.CIDR.Addr().Unmap())] = true
		}
	}
	return fams
}
