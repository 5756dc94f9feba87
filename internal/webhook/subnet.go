package webhook

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/family"
)

// addrRange is a subnet's parsed range: its CIDR, the inclusive block
// [start, end] pods are given addresses from (defaults applied), and its
// gateway (invalid when unset).
type addrRange struct {
	cidr       netip.Prefix
	start, end netip.Addr
	gateway    netip.Addr
}

func (r addrRange) contains(a netip.Addr) bool {
	return a.IsValid() && r.start.Compare(a) <= 0 && a.Compare(r.end) <= 0
}

func (r addrRange) overlaps(o addrRange) bool {
	return r.start.Compare(o.end) <= 0 && o.start.Compare(r.end) <= 0
}

func (r addrRange) String() string { return r.start.String() + "-" + r.end.String() }

// ValidateSubnet checks s against the cluster's networks and other subnets:
// its network exists; its family matches its CIDR; it overlaps no other
// subnet, except one of the same network with the identical CIDR whose range
// is disjoint from s's and holds neither gateway; a subnet of a VLAN network
// has a gateway; only a VLAN network's subnets set netID; its namespace
// selectors parse. subnets may include s itself (matched by name); it is
// skipped.
func ValidateSubnet(s *estuaryv1.Subnet, networks []estuaryv1.Network, subnets []estuaryv1.Subnet) error {
	r, err := parseRange(s)
	if err != nil {
		return err
	}
	errs := checkParent(s, networks)
	errs = append(errs, checkOverlaps(s, r, subnets)...)
	errs = append(errs, checkSubnetSelectors(s)...)
	return errors.Join(errs...)
}

// ValidateSubnetDelete refuses to delete a subnet that still has IPInstances
// (bound or retained addresses), naming one of them.
func ValidateSubnetDelete(s *estuaryv1.Subnet, instances []estuaryv1.IPInstance) error {
	var held []*estuaryv1.IPInstance
	for i := range instances {
		if instances[i].Spec.Subnet == s.Name {
			held = append(held, &instances[i])
		}
	}
	if len(held) == 0 {
		return nil
	}
	first := slices.MinFunc(held, func(a, b *estuaryv1.IPInstance) int { return strings.Compare(a.Name, b.Name) })
	b := first.Spec.Binding
	return netmodel.Deny(netmodel.KindSubnet, s.Name, "", "cannot be deleted while %s %q (pod %s/%s, spec.subnet %q) holds an address from it%s; release its addresses first",
		netmodel.KindIPInstance, first.Name, b.Namespace, b.PodName, s.Name, more(len(held)-1))
}

// parseRange parses the subnet's range and applies the defaults of start
// and end: the first address after the network address, and the last
// address before the IPv4 broadcast address (or the last IPv6 address).
func parseRange(s *estuaryv1.Subnet) (addrRange, error) {
	rng := &s.Spec.Range
	p, err := netip.ParsePrefix(rng.CIDR)
	if err != nil || p.Masked() != p {
		return addrRange{}, netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range.cidr", "%q is not a CIDR in canonical form", rng.CIDR)
	}
	if v := familyOf(p.Addr()); v != rng.Version {
		return addrRange{}, netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range.version", "%d does not match cidr %s, an IPv%d subnet", rng.Version, p, v)
	}
	r := addrRange{cidr: p, start: p.Addr().Next(), end: family.LastAddr(p)}
	if p.Addr().Is4() {
		r.end = r.end.Prev()
	}
	fields := []struct {
		name string
		val  estuaryv1.IPAddress
		dst  *netip.Addr
	}{{"start", rng.Start, &r.start}, {"end", rng.End, &r.end}, {"gateway", rng.Gateway, &r.gateway}}
	for _, f := range fields {
		if f.val == "" {
			continue
		}
		a, err := netip.ParseAddr(string(f.val))
		if err != nil || !p.Contains(a) {
			return addrRange{}, netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range."+f.name, "%q is not an address inside cidr %s", f.val, p)
		}
		*f.dst = a
	}
	return r, nil
}

func familyOf(a netip.Addr) int32 {
	if a.Is4() {
		return 4
	}
	return 6
}

// checkParent checks the rules that depend on the subnet's network.
func checkParent(s *estuaryv1.Subnet, networks []estuaryv1.Network) []error {
	var n *estuaryv1.Network
	for i := range networks {
		if networks[i].Name == s.Spec.Network {
			n = &networks[i]
		}
	}
	if n == nil {
		return []error{netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.network", "%q: %s %q does not exist", s.Spec.Network, netmodel.KindNetwork, s.Spec.Network)}
	}
	mode := netmodel.Mode(&n.Spec)
	var errs []error
	if mode == estuaryv1.NetworkModeVLAN && s.Spec.Range.Gateway == "" {
		errs = append(errs, netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range.gateway", "is required: %s %q is an Underlay network in mode VLAN, whose pods route through the segment's gateway",
			netmodel.KindNetwork, n.Name))
	}
	if s.Spec.NetID != nil && mode != estuaryv1.NetworkModeVLAN {
		errs = append(errs, netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.netID", "%d: only subnets of a VLAN network override its VLAN id, and %s %q is in mode %s",
			*s.Spec.NetID, netmodel.KindNetwork, n.Name, mode))
	}
	return errs
}

// checkOverlaps returns one denial per other subnet that s conflicts with.
func checkOverlaps(s *estuaryv1.Subnet, r addrRange, subnets []estuaryv1.Subnet) []error {
	others := slices.Clone(subnets)
	slices.SortFunc(others, func(a, b estuaryv1.Subnet) int { return cmp.Compare(a.Name, b.Name) })
	var errs []error
	for i := range others {
		o := &others[i]
		if o.Name == s.Name {
			continue
		}
		or, err := parseRange(o)
		if err != nil || !r.cidr.Overlaps(or.cidr) {
			continue
		}
		if r.cidr != or.cidr || o.Spec.Network != s.Spec.Network {
			errs = append(errs, overlapDenial(s, r, o, or))
			continue
		}
		errs = append(errs, sharedCIDRDenials(s, r, o, or)...)
	}
	return errs
}

func overlapDenial(s *estuaryv1.Subnet, r addrRange, o *estuaryv1.Subnet, or addrRange) error {
	why := ""
	switch {
	case o.Spec.Network != s.Spec.Network:
		why = fmt.Sprintf(" of %s %q; subnets may share addresses only within one network", netmodel.KindNetwork, o.Spec.Network)
	case r.cidr != or.cidr:
		why = "; subnets of one network may share only an identical cidr"
	}
	return netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range.cidr", "%s overlaps %s %q (%s)%s", r.cidr, netmodel.KindSubnet, o.Name, or.cidr, why)
}

// sharedCIDRDenials checks two subnets of one network with the same CIDR:
// their ranges must be disjoint and neither may hand out the other's gateway.
func sharedCIDRDenials(s *estuaryv1.Subnet, r addrRange, o *estuaryv1.Subnet, or addrRange) []error {
	var errs []error
	if r.overlaps(or) {
		errs = append(errs, netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range", "start-end %s overlaps %s %q's range %s in the shared cidr %s; ranges of subnets with one cidr must be disjoint",
			r, netmodel.KindSubnet, o.Name, or, r.cidr))
	}
	if r.contains(or.gateway) && or.gateway != r.gateway {
		errs = append(errs, netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range", "start-end %s holds %s %q's gateway %s",
			r, netmodel.KindSubnet, o.Name, or.gateway))
	}
	if or.contains(r.gateway) && or.gateway != r.gateway {
		errs = append(errs, netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range.gateway", "%s is inside %s %q's range %s, which may hand it out",
			r.gateway, netmodel.KindSubnet, o.Name, or))
	}
	return errs
}
