package webhook

import (
	"cmp"
	"errors"
	"net/netip"
	"slices"
	"strings"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// span formats a subnet's window as start-end.
func span(f ipam.Footprint) string { return f.Start.String() + "-" + f.End.String() }

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

// parseRange parses the subnet's range into what the sharing rule sees of
// it, with ipam.Window's defaults of start and end.
func parseRange(s *estuaryv1.Subnet) (ipam.Footprint, error) {
	rng := &s.Spec.Range
	p, err := netip.ParsePrefix(rng.CIDR)
	if err != nil || p.Masked() != p {
		return ipam.Footprint{}, netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range.cidr", "%q is not a CIDR in canonical form", rng.CIDR)
	}
	if v := family.Of(p.Addr()).Version(); v != int(rng.Version) {
		return ipam.Footprint{}, netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range.version", "%d does not match cidr %s, an IPv%d subnet", rng.Version, p, v)
	}
	r := ipam.Footprint{Network: s.Spec.Network, Prefix: p}
	fields := []struct {
		name string
		val  estuaryv1.IPAddress
		dst  *netip.Addr
	}{{"start", rng.Start, &r.Start}, {"end", rng.End, &r.End}, {"gateway", rng.Gateway, &r.Gateway}}
	for _, f := range fields {
		if f.val == "" {
			continue
		}
		a, err := netip.ParseAddr(string(f.val))
		if err != nil || !p.Contains(a) {
			return ipam.Footprint{}, netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range."+f.name, "%q is not an address inside cidr %s", f.val, p)
		}
		*f.dst = a
	}
	r.Start, r.End = ipam.Window(p, r.Start, r.End)
	return r, nil
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

// checkOverlaps returns one denial per conflict (ipam.Footprint.Conflicts)
// between s and another subnet.
func checkOverlaps(s *estuaryv1.Subnet, r ipam.Footprint, subnets []estuaryv1.Subnet) []error {
	others := slices.Clone(subnets)
	slices.SortFunc(others, func(a, b estuaryv1.Subnet) int { return cmp.Compare(a.Name, b.Name) })
	var errs []error
	for i := range others {
		o := &others[i]
		if o.Name == s.Name {
			continue
		}
		or, err := parseRange(o)
		if err != nil {
			continue
		}
		for _, c := range r.Conflicts(or) {
			errs = append(errs, overlapDenial(s, r, o, or, c))
		}
	}
	return errs
}

// overlapDenial words conflict c between s and o.
func overlapDenial(s *estuaryv1.Subnet, r ipam.Footprint, o *estuaryv1.Subnet, or ipam.Footprint, c ipam.Conflict) error {
	switch c {
	case ipam.ConflictNetwork:
		return netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range.cidr", "%s overlaps %s %q (%s) of %s %q; subnets may share addresses only within one network",
			r.Prefix, netmodel.KindSubnet, o.Name, or.Prefix, netmodel.KindNetwork, o.Spec.Network)
	case ipam.ConflictPrefix:
		return netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range.cidr", "%s overlaps %s %q (%s); subnets of one network may share only an identical cidr",
			r.Prefix, netmodel.KindSubnet, o.Name, or.Prefix)
	case ipam.ConflictWindow:
		return netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range", "start-end %s overlaps %s %q's range %s in the shared cidr %s; ranges of subnets with one cidr must be disjoint",
			span(r), netmodel.KindSubnet, o.Name, span(or), r.Prefix)
	case ipam.ConflictHoldsGateway:
		return netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range", "start-end %s holds %s %q's gateway %s",
			span(r), netmodel.KindSubnet, o.Name, or.Gateway)
	default:
		return netmodel.Deny(netmodel.KindSubnet, s.Name, "spec.range.gateway", "%s is inside %s %q's range %s, which may hand it out",
			r.Gateway, netmodel.KindSubnet, o.Name, span(or))
	}
}
