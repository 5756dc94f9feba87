package translate

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// LocalUnderlays returns the Underlay networks of mode (not being deleted)
// whose domain holds the node, by name. Domain membership is the manager's
// (netmodel.Attached), so the node labels, the webhook's affinity and the
// data path agree.
func LocalUnderlays(node *corev1.Node, nets []estuaryv1.Network, mode estuaryv1.NetworkMode) []estuaryv1.Network {
	var out []estuaryv1.Network
	for i := range nets {
		n := &nets[i]
		if n.Spec.Type != estuaryv1.NetworkTypeUnderlay || n.DeletionTimestamp != nil || netmodel.Mode(&n.Spec) != mode {
			continue
		}
		if netmodel.Attached(n, node.Labels) {
			out = append(out, *n)
		}
	}
	slices.SortFunc(out, func(a, b estuaryv1.Network) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// BuildUnderlayInput computes the underlay's desired input for node: the
// Underlay networks (VLAN and BGP mode) whose domain holds it, each with its
// mode, a BGP network's peer addresses, its subnets
// and the local pods (pods, the addresses plumbed on this node) inside each
// subnet's CIDR, and every Underlay and GlobalBGP subnet of the cluster for
// table numbering. The GlobalBGP network's subnets count as subnets of the
// node's BGP network: its pods leave through the same peer. A peer marked
// doesNotRouteTraffic is left out of a BGP network's peers here, so it is
// never a default gateway. A node outside every domain gets an input without
// networks, which removes the underlay from it. Subnets it cannot read are
// skipped and reported; the rest of the input stays valid.
func BuildUnderlayInput(node *corev1.Node, uplink string, objs Objects, pods []netip.Addr) (underlay.Input, error) {
	in := underlay.Input{Uplink: uplink}
	var errs []error
	kinds := map[string]estuaryv1.NetworkType{}
	for _, n := range objs.Networks {
		kinds[n.Name] = n.Spec.Type
	}
	global, _ := netmodel.GlobalBGPNetwork(objs.Networks)
	bySubnet := map[string][]underlay.Subnet{}
	for _, sn := range objs.Subnets {
		if k := kinds[sn.Spec.Network]; k != estuaryv1.NetworkTypeUnderlay && k != estuaryv1.NetworkTypeGlobalBGP {
			continue
		}
		s, err := underlaySubnet(sn, pods)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		in.Cluster = append(in.Cluster, underlay.SubnetRef{Name: sn.Name, CIDR: s.CIDR, Created: sn.CreationTimestamp.Time})
		bySubnet[sn.Spec.Network] = append(bySubnet[sn.Spec.Network], s)
	}
	for _, n := range LocalUnderlays(node, objs.Networks, estuaryv1.NetworkModeVLAN) {
		vlan := netmodel.VLAN(&n.Spec)
		subs := bySubnet[n.Name]
		slices.SortFunc(subs, func(a, b underlay.Subnet) int { return strings.Compare(a.Name, b.Name) })
		in.Networks = append(in.Networks, underlay.Network{Name: n.Name, Mode: underlay.ModeVLAN, VLAN: vlan, Subnets: subs})
	}
	for _, n := range LocalUnderlays(node, objs.Networks, estuaryv1.NetworkModeBGP) {
		subs := slices.Concat(bySubnet[n.Name], bySubnet[global.Name])
		slices.SortFunc(subs, func(a, b underlay.Subnet) int { return strings.Compare(a.Name, b.Name) })
		u := underlay.Network{Name: n.Name, Mode: underlay.ModeBGP, Subnets: subs}
		for _, p := range n.Spec.BGPPeers {
			if p.DoesNotRouteTraffic {
				continue
			}
			a, err := netip.ParseAddr(p.Address)
			if err != nil {
				errs = append(errs, fmt.Errorf("network %s: bgpPeers address %q: %w", n.Name, p.Address, err))
				continue
			}
			u.Peers = append(u.Peers, a.Unmap())
		}
		in.Networks = append(in.Networks, u)
	}
	slices.SortFunc(in.Networks, func(a, b underlay.Network) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(in.Cluster, func(a, b underlay.SubnetRef) int { return strings.Compare(a.Name, b.Name) })
	return in, errors.Join(errs...)
}

// underlaySubnet reads one Underlay subnet with the local pods inside it.
func underlaySubnet(sn estuaryv1.Subnet, pods []netip.Addr) (underlay.Subnet, error) {
	p, err := netip.ParsePrefix(sn.Spec.Range.CIDR)
	if err != nil {
		return underlay.Subnet{}, fmt.Errorf("subnet %s: spec.range.cidr: %w", sn.Name, err)
	}
	s := underlay.Subnet{Name: sn.Name, CIDR: p.Masked(), NATOutgoing: netmodel.NATOutgoing(estuaryv1.NetworkTypeUnderlay, &sn.Spec)}
	if g := string(sn.Spec.Range.Gateway); g != "" {
		if s.Gateway, err = netip.ParseAddr(g); err != nil {
			return underlay.Subnet{}, fmt.Errorf("subnet %s: spec.range.gateway: %w", sn.Name, err)
		}
	}
	s.VLAN = netmodel.SubnetVLAN(&sn.Spec)
	s.LocalPods = PodsIn(pods, s.CIDR)
	return s, nil
}

// PodsIn returns the addresses of pods inside cidr.
func PodsIn(pods []netip.Addr, cidr netip.Prefix) []netip.Addr {
	var out []netip.Addr
	for _, a := range pods {
		if cidr.Contains(a.Unmap()) {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// WithRetired adds to cluster the refs of retired (the subnets of the last
// input handed to the agent) that are gone from it. The agent owns proxy
// neighbours and enhanced addresses only inside the subnets its input
// names, so a deleted subnet stays named until an Apply has removed its
// state; it keeps its place in the numbering meanwhile, so no other subnet
// moves before then.
func WithRetired(cluster, retired []underlay.SubnetRef) []underlay.SubnetRef {
	out := slices.Clone(cluster)
	for _, r := range retired {
		if !slices.ContainsFunc(cluster, func(c underlay.SubnetRef) bool { return c.Name == r.Name }) {
			out = append(out, r)
		}
	}
	return out
}
