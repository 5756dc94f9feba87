package overlay

import (
	"net/netip"

	"github.com/estuary-cni/estuary/internal/dataplane/state"
)

// Desired computes the kernel state and the NAT the overlay wants on a node.
// It is pure: equal inputs give equal outputs, and nothing is read.
func Desired(in Input) (state.State, state.NAT) {
	var s state.State
	fams := subnetFamilies(in.Subnets)
	for _, sn := range in.Subnets {
		if !sn.CIDR.IsValid() {
			continue
		}
		s.Routes = append(s.Routes, onDevice(SubnetsTable, sn.CIDR.Masked(), in.Device))
		s.Rules = append(s.Rules, state.Rule{Priority: NodesPriority, Table: NodesTable, Src: sn.CIDR.Masked()})
	}
	for _, f := range []state.Family{state.IPv4, state.IPv6} {
		if fams[f] {
			s.Rules = append(s.Rules, state.Rule{Priority: SubnetsPriority, Table: SubnetsTable, Family: f})
		}
	}
	for _, r := range remotes(in) {
		for _, ip := range r.NodeIPs {
			if ip = ip.Unmap(); ip.IsValid() && fams[familyOf(ip)] {
				s.Routes = append(s.Routes, onDevice(NodesTable, netip.PrefixFrom(ip, ip.BitLen()), in.Device))
			}
		}
		if !in.NoFlood {
			s.FDB = append(s.FDB, state.FDB{Dev: in.Device, Dst: r.VTEP})
		}
		if !r.MAC.IsZero() {
			s.FDB = append(s.FDB, state.FDB{Dev: in.Device, MAC: r.MAC, Dst: r.VTEP})
		}
	}
	for _, p := range in.LocalPods {
		if p.IsValid() {
			s.Neighs = append(s.Neighs, state.Neigh{Dev: in.Device, IP: p.Unmap(), Proxy: true})
		}
	}
	for _, ip := range in.NodeIPs {
		if ip.IsValid() && familyOf(ip) == state.IPv6 && fams[state.IPv6] {
			s.Neighs = append(s.Neighs, state.Neigh{Dev: in.Device, IP: ip, Proxy: true})
		}
	}
	return s, desiredNAT(in)
}

// remotes returns the valid remotes other than this node.
func remotes(in Input) []Remote {
	var out []Remote
	for _, r := range in.Remotes {
		if r.VTEP.IsValid() && r.VTEP.Unmap() != in.LocalIP.Unmap() {
			r.VTEP = r.VTEP.Unmap()
			out = append(out, r)
		}
	}
	return out
}

func onDevice(table int, dst netip.Prefix, dev string) state.Route {
	return state.Route{Table: table, Dst: dst, Dev: dev, Scope: state.ScopeLink, Protocol: state.ProtocolEstuary}
}

// desiredNAT masquerades, per family, the NATOutgoing subnets towards every
// destination outside the cluster's prefixes and the overlay subnets, unless
// the packet leaves through the tunnel.
func desiredNAT(in Input) state.NAT {
	var n state.NAT
	for _, f := range []state.Family{state.IPv4, state.IPv6} {
		var nf state.NATFamily
		for _, sn := range in.Subnets {
			if !sn.CIDR.IsValid() || familyOf(sn.CIDR.Addr()) != f {
				continue
			}
			nf.Exempt = append(nf.Exempt, sn.CIDR)
			if sn.NATOutgoing {
				nf.Sources = append(nf.Sources, sn.CIDR)
			}
		}
		for _, p := range in.ClusterPrefixes {
			if p.IsValid() && familyOf(p.Addr()) == f {
				nf.Exempt = append(nf.Exempt, p)
			}
		}
		nf.Device = in.Device
		nf = nf.Canonical()
		if f == state.IPv6 {
			n.IPv6 = nf
		} else {
			n.IPv4 = nf
		}
	}
	return n
}

func subnetFamilies(sns []Subnet) map[state.Family]bool {
	fams := map[state.Family]bool{}
	for _, sn := range sns {
		if sn.CIDR.IsValid() {
			fams[familyOf(sn.CIDR.Addr())] = true
		}
	}
	return fams
}

func familyOf(a netip.Addr) state.Family {
	if a.Unmap().Is4() {
		return state.IPv4
	}
	return state.IPv6
}
