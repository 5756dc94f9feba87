package underlay

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// Device is a vlan-if the underlay uses on this node.
type Device struct {
	Name string
	// VLAN is the 802.1Q id; 0 means the uplink itself.
	VLAN int
	// Families are the address families of its local subnets.
	V4, V6 bool
}

// local is one subnet with local pods, resolved.
type local struct {
	sub  Subnet
	dev  string
	vlan int
	slot int
	pods []netip.Addr // valid, unmapped, inside sub.CIDR, sorted, unique
	bgp  bool         // a BGP subnet: default via peer, nothing on the segment
	peer netip.Addr   // a BGP subnet's next hop
}

// resolve returns the subnets of in that have local pods, in slot order,
// and the problems that made it skip others.
func resolve(in Input) ([]local, []error) {
	refs := slices.Clone(in.Cluster)
	known := make(map[string]bool, len(refs))
	for _, r := range refs {
		known[r.Name] = true
	}
	var errs []error
	var cands []local
	for _, n := range in.Networks {
		for _, s := range n.Subnets {
			if !known[s.Name] {
				refs = append(refs, SubnetRef{Name: s.Name, CIDR: s.CIDR, Created: maxTime})
				known[s.Name] = true
			}
			l, ok, err := resolveSubnet(in, n, s)
			if err != nil {
				errs = append(errs, err)
			}
			if ok {
				cands = append(cands, l)
			}
		}
	}
	slots := Numbering(refs)
	var out []local
	for _, l := range cands {
		n, ok := slots[l.sub.Name]
		if !ok {
			errs = append(errs, fmt.Errorf("underlay subnet %s: no free table among %d", l.sub.Name, Slots))
			continue
		}
		l.slot = n
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b local) int { return a.slot - b.slot })
	return out, errs
}

func resolveSubnet(in Input, n Network, s Subnet) (local, bool, error) {
	if !s.CIDR.IsValid() {
		return local{}, false, fmt.Errorf("underlay subnet %s: invalid CIDR", s.Name)
	}
	vlan := vlanOf(n, s)
	if err := validVLAN(vlan); err != nil {
		return local{}, false, fmt.Errorf("underlay subnet %s: %w", s.Name, err)
	}
	uplink := in.uplinkOf(n)
	if uplink == "" {
		return local{}, false, fmt.Errorf("underlay subnet %s: no uplink", s.Name)
	}
	s.CIDR = netip.PrefixFrom(s.CIDR.Addr().Unmap(), s.CIDR.Bits()).Masked()
	s.Gateway = s.Gateway.Unmap()
	var pods []netip.Addr
	for _, p := range s.LocalPods {
		if p = p.Unmap(); p.IsValid() && s.CIDR.Contains(p) {
			pods = append(pods, p)
		}
	}
	if len(pods) == 0 {
		return local{}, false, nil
	}
	slices.SortFunc(pods, netip.Addr.Compare)
	l := local{sub: s, dev: VLANName(uplink, vlan), vlan: vlan, pods: slices.Compact(pods), bgp: n.IsBGP()}
	if l.bgp {
		if l.peer = reachablePeer(in, n, uplink, s.CIDR.Addr().Is4()); !l.peer.IsValid() {
			return local{}, false, fmt.Errorf("underlay subnet %s: no BGP peer of network %s on the networks of uplink %s",
				s.Name, n.Name, uplink)
		}
	}
	return l, true, nil
}

// reachablePeer returns the first peer of n of the given family inside the
// prefix of a node address on the uplink, the zero Addr if none is.
func reachablePeer(in Input, n Network, uplink string, v4 bool) netip.Addr {
	for _, p := range n.Peers {
		p = p.Unmap()
		if !p.IsValid() || p.Is4() != v4 {
			continue
		}
		for _, a := range in.NodeAddrs {
			if a.Dev == uplink && a.Prefix.IsValid() && a.Prefix.Bits() < a.Prefix.Addr().BitLen() &&
				netip.PrefixFrom(a.Prefix.Addr().Unmap(), a.Prefix.Bits()).Contains(p) {
				return p
			}
		}
	}
	return netip.Addr{}
}

// maxTime orders subnets missing from Input.Cluster after every listed one.
var maxTime = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// Desired computes the kernel state the underlay wants on a node: per
// local subnet its rule, table, proxy neighbours and enhanced address (a
// BGP subnet: its rule and `default via <peer> dev <uplink>` only). It is
// pure: equal inputs give equal outputs, and nothing is read.
func Desired(in Input) desired.State {
	var s desired.State
	ls, _ := resolve(in)
	for _, l := range ls {
		table := desired.TableUnderlayFirst + l.slot
		cidr := l.sub.CIDR
		s.Rules = append(s.Rules, desired.Rule{Priority: table, Table: table, Src: cidr})
		if l.bgp {
			s.Routes = append(s.Routes, desired.Route{
				Table: table, Dst: netip.PrefixFrom(unspecified(l.peer), 0), Gw: l.peer, Dev: l.dev,
				Protocol: desired.ProtocolEstuary,
			})
			continue
		}
		s.Routes = append(s.Routes, desired.Route{
			Table: table, Dst: cidr, Dev: l.dev, Scope: desired.ScopeLink, Protocol: desired.ProtocolEstuary,
		})
		if gw := l.sub.Gateway; gw.IsValid() && gw.Is4() == cidr.Addr().Is4() {
			s.Routes = append(s.Routes, desired.Route{
				Table: table, Dst: netip.PrefixFrom(unspecified(gw), 0), Gw: gw, Dev: l.dev,
				Protocol: desired.ProtocolEstuary,
			})
		}
		for _, p := range l.pods {
			s.Neighs = append(s.Neighs, desired.Neigh{Dev: l.dev, IP: p, Proxy: true})
		}
		if a, ok := enhanced(in, l); ok {
			s.Addrs = append(s.Addrs, a)
		}
	}
	return s
}

// enhanced returns the enhanced address of a local subnet: its lowest
// local pod address with the subnet's length, scope link, noprefixroute.
// IPv6 subnets and subnets in which the node holds an address on the
// vlan-if get none.
func enhanced(in Input, l local) (desired.Addr, bool) {
	if !l.sub.CIDR.Addr().Is4() {
		return desired.Addr{}, false
	}
	for _, a := range in.NodeAddrs {
		if a.Dev == l.dev && l.sub.CIDR.Contains(a.Prefix.Addr().Unmap()) {
			return desired.Addr{}, false
		}
	}
	return desired.Addr{
		Dev:           l.dev,
		Prefix:        netip.PrefixFrom(l.pods[0], l.sub.CIDR.Bits()),
		Scope:         desired.ScopeLink,
		NoPrefixRoute: true,
	}, true
}

// Hidden returns the routes that must not exist for Desired(in) to work:
// the kernel's `local <addr>` route in table local for each enhanced
// address, which would make the node take that pod's packets as its own.
func Hidden(in Input) []desired.Route { return hiddenOf(Desired(in)) }

// hiddenOf returns the local routes of want's enhanced addresses.
func hiddenOf(want desired.State) []desired.Route {
	var out []desired.Route
	for _, a := range want.Addrs {
		out = append(out, desired.LocalRouteOf(a))
	}
	return out
}

// Devices returns the vlan-ifs Desired(in) uses, by name.
func Devices(in Input) []Device {
	ls, _ := resolve(in)
	byName := map[string]*Device{}
	var out []Device
	for _, l := range ls {
		d, ok := byName[l.dev]
		if !ok {
			out = append(out, Device{Name: l.dev, VLAN: l.vlan})
			d = &out[len(out)-1]
			byName[l.dev] = d
		}
		if l.sub.CIDR.Addr().Is4() {
			d.V4 = true
		} else {
			d.V6 = true
		}
	}
	slices.SortFunc(out, func(a, b Device) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Problems returns what Desired skipped and why: invalid CIDRs or VLAN
// ids, no uplink, no free table.
func Problems(in Input) []error {
	_, errs := resolve(in)
	return errs
}

// NATSources returns the CIDRs of this node's underlay subnets (VLAN and
// BGP) whose natOutgoing is true, for the overlay's NAT table (Input.Subnets with
// NATOutgoing there); sorted, unique.
func NATSources(in Input) []netip.Prefix {
	var out []netip.Prefix
	for _, n := range in.Networks {
		for _, s := range n.Subnets {
			if s.NATOutgoing && s.CIDR.IsValid() {
				out = append(out, s.CIDR.Masked())
			}
		}
	}
	slices.SortFunc(out, comparePrefix)
	return slices.Compact(out)
}

// underlayPrefixes returns every underlay subnet CIDR the input knows.
func underlayPrefixes(in Input) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range in.Cluster {
		if r.CIDR.IsValid() {
			out = append(out, r.CIDR.Masked())
		}
	}
	for _, n := range in.Networks {
		for _, s := range n.Subnets {
			if s.CIDR.IsValid() {
				out = append(out, s.CIDR.Masked())
			}
		}
	}
	return out
}

func unspecified(a netip.Addr) netip.Addr {
	if a.Is4() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}
