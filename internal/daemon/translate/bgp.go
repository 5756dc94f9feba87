package translate

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/bgp"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// BGPNetwork is what this node announces for one BGP-mode Underlay network
// whose domain holds it.
type BGPNetwork struct {
	Name    string
	ASN     uint32
	Peers   []estuaryv1.BGPPeer
	Subnets []netip.Prefix
	// Global are the subnets of the GlobalBGP network: their local pods'
	// host routes are announced too, never their prefixes (their addresses
	// live on every node).
	Global []netip.Prefix
	// Prefixes is bgp.DesiredPrefixes of the local pods in Subnets and
	// Global, and Subnets.
	Prefixes []netip.Prefix
}

// BuildBGPNetworks computes the BGP networks of node: for each BGP-mode
// Underlay network whose domain holds it, its AS number (netID), its peers
// as the API lists them, and the prefixes to announce: its subnets, and the
// host routes of the local pods of its subnets and of the GlobalBGP
// network's. The GlobalBGP pods of a node are so announced by the speaker of
// the node's BGP network (the admission rules give a node at most one), to
// that network's peers, as hybridnet does; a node outside every BGP domain
// announces none. A network without a valid AS number, or a subnet without
// a valid CIDR, is skipped and reported.
func BuildBGPNetworks(node *corev1.Node, objs Objects, pods []netip.Addr) ([]BGPNetwork, error) {
	var out []BGPNetwork
	global, errs := globalSubnets(objs)
	var globalPods []netip.Addr
	for _, p := range global {
		globalPods = append(globalPods, PodsIn(pods, p)...)
	}
	for _, n := range LocalUnderlays(node, objs.Networks, estuaryv1.NetworkModeBGP) {
		asn, ok := netmodel.ASN(&n.Spec)
		if !ok {
			errs = append(errs, fmt.Errorf("network %s: spec.netID is not an AS number (1-%d)", n.Name, uint32(math.MaxUint32)))
			continue
		}
		b := BGPNetwork{Name: n.Name, ASN: asn, Peers: n.Spec.BGPPeers, Global: global}
		local := slices.Clone(globalPods)
		for _, sn := range objs.Subnets {
			if sn.Spec.Network != n.Name {
				continue
			}
			p, err := netip.ParsePrefix(sn.Spec.Range.CIDR)
			if err != nil {
				errs = append(errs, fmt.Errorf("subnet %s: spec.range.cidr: %w", sn.Name, err))
				continue
			}
			b.Subnets = append(b.Subnets, p.Masked())
			local = append(local, PodsIn(pods, p.Masked())...)
		}
		slices.SortFunc(b.Subnets, comparePrefixes)
		b.Prefixes = bgp.DesiredPrefixes(local, b.Subnets)
		out = append(out, b)
	}
	return out, errors.Join(errs...)
}

// globalSubnets returns the CIDRs of the subnets of the GlobalBGP network,
// sorted; a subnet without a valid CIDR is skipped and reported.
func globalSubnets(objs Objects) ([]netip.Prefix, []error) {
	g, ok := netmodel.GlobalBGPNetwork(objs.Networks)
	if !ok {
		return nil, nil
	}
	var out []netip.Prefix
	var errs []error
	for _, sn := range objs.Subnets {
		if sn.Spec.Network != g.Name {
			continue
		}
		p, err := netip.ParsePrefix(sn.Spec.Range.CIDR)
		if err != nil {
			errs = append(errs, fmt.Errorf("subnet %s: spec.range.cidr: %w", sn.Name, err))
			continue
		}
		out = append(out, p.Masked())
	}
	slices.SortFunc(out, comparePrefixes)
	return out, errs
}

// SpeakerConfig is a network's speaker configuration on node: its AS, the
// node's first internal IPv4 address as router id and IPv4 next hop, its
// first internal IPv6 address (if any) as IPv6 next hop. An IPv6-only node
// takes its router id from its IPv6 address (bgp.RouterIDFromIPv6) and
// announces no IPv4 next hop.
func SpeakerConfig(node *corev1.Node, n BGPNetwork) (bgp.Config, error) {
	cfg := bgp.Config{LocalASN: n.ASN}
	for _, ip := range NodeIPs(node) {
		if ip.Is4() && !cfg.RouterID.IsValid() {
			cfg.RouterID, cfg.NextHopIPv4 = ip, ip
		}
		if ip.Is6() && !cfg.NextHopIPv6.IsValid() {
			cfg.NextHopIPv6 = ip
		}
	}
	if !cfg.RouterID.IsValid() && cfg.NextHopIPv6.IsValid() {
		if id, ok := bgp.RouterIDFromIPv6(cfg.NextHopIPv6); ok {
			cfg.RouterID = id
		}
	}
	if !cfg.RouterID.IsValid() {
		return cfg, fmt.Errorf("network %s: node %s has no internal IPv4 address, nor an IPv6 one whose last 32 bits "+
			"are not zero, for the bgp router id", n.Name, node.Name)
	}
	return cfg, nil
}
