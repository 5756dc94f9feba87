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
	Name     string
	ASN      uint32
	Peers    []estuaryv1.BGPPeer
	Subnets  []netip.Prefix
	Prefixes []netip.Prefix // bgp.DesiredPrefixes of the local pods in Subnets and Subnets
}

// BuildBGPNetworks computes the BGP networks of node: for each BGP-mode
// Underlay network whose domain holds it, its AS number (netID), its peers
// as the API lists them, and the prefixes to announce. A network without
// a valid AS number, or a subnet without a valid CIDR, is skipped and
// reported.
func BuildBGPNetworks(node *corev1.Node, objs Objects, pods []netip.Addr) ([]BGPNetwork, error) {
	var out []BGPNetwork
	var errs []error
	for _, n := range LocalUnderlays(node, objs.Networks, estuaryv1.NetworkModeBGP) {
		asn, ok := netmodel.ASN(&n.Spec)
		if !ok {
			errs = append(errs, fmt.Errorf("network %s: spec.netID is not an AS number (1-%d)", n.Name, uint32(math.MaxUint32)))
			continue
		}
		b := BGPNetwork{Name: n.Name, ASN: asn, Peers: n.Spec.BGPPeers}
		var local []netip.Addr
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

// SpeakerConfig is a network's speaker configuration on node: its AS, the
// node's first internal IPv4 address as router id and IPv4 next hop, its
// first internal IPv6 address (if any) as IPv6 next hop.
func SpeakerConfig(node *corev1.Node, n BGPNetwork) (bgp.Config, error) {
	cfg := bgp.Config{LocalASN: n.ASN}
	for _, ip := range NodeIPs(*node) {
		if ip.Is4() && !cfg.RouterID.IsValid() {
			cfg.RouterID, cfg.NextHopIPv4 = ip, ip
		}
		if ip.Is6() && !cfg.NextHopIPv6.IsValid() {
			cfg.NextHopIPv6 = ip
		}
	}
	if !cfg.RouterID.IsValid() {
		return cfg, fmt.Errorf("network %s: node %s has no internal IPv4 address for the bgp router id", n.Name, node.Name)
	}
	return cfg, nil
}
