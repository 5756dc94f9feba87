package netmodel

import (
	"maps"
	"math"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
)

// DefaultVNI is the Overlay network's VXLAN network identifier when its
// spec.netID is unset or outside 1-16777215.
const DefaultVNI = 4

// Mode is the network's mode, defaulted from its type when unset: VXLAN for
// Overlay, VLAN for Underlay, BGP for GlobalBGP (whose addresses are routed
// by the speakers of the nodes' BGP networks).
func Mode(spec *estuaryv1.NetworkSpec) estuaryv1.NetworkMode {
	switch {
	case spec.Mode != "":
		return spec.Mode
	case spec.Type == estuaryv1.NetworkTypeOverlay:
		return estuaryv1.NetworkModeVXLAN
	case spec.Type == estuaryv1.NetworkTypeGlobalBGP:
		return estuaryv1.NetworkModeBGP
	default:
		return estuaryv1.NetworkModeVLAN
	}
}

// VNI is an Overlay network's VXLAN network identifier: spec.netID, or
// DefaultVNI when that is unset or not a 24-bit VNI.
func VNI(spec *estuaryv1.NetworkSpec) uint32 {
	if spec.NetID == nil || *spec.NetID <= 0 || *spec.NetID > 1<<24-1 {
		return DefaultVNI
	}
	return uint32(*spec.NetID) // #nosec G115 -- bounded to 24 bits above
}

// ASN is a BGP network's AS number, spec.netID; ok is false when that is
// unset or not in 1-4294967295.
func ASN(spec *estuaryv1.NetworkSpec) (asn uint32, ok bool) {
	if spec.NetID == nil || *spec.NetID < 1 || *spec.NetID > math.MaxUint32 {
		return 0, false
	}
	return uint32(*spec.NetID), true // #nosec G115 -- bounded above
}

// VLAN is a VLAN network's VLAN id, spec.netID; 0 (untagged) when unset.
func VLAN(spec *estuaryv1.NetworkSpec) int {
	if spec.NetID == nil {
		return 0
	}
	return int(*spec.NetID)
}

// SubnetVLAN is a subnet's own VLAN id, overriding its network's; nil when
// the subnet sets none.
func SubnetVLAN(sn *estuaryv1.SubnetSpec) *int {
	if sn.NetID == nil {
		return nil
	}
	v := int(*sn.NetID)
	return &v
}

// NetID is the identifier recorded with an address of subnet sn in network
// n (either may be nil when unknown): the subnet's netID, else the
// network's, else for an Overlay network its VNI. Nil when there is none.
func NetID(n *estuaryv1.NetworkSpec, sn *estuaryv1.SubnetSpec) *int64 {
	switch {
	case sn != nil && sn.NetID != nil:
		v := *sn.NetID
		return &v
	case n == nil:
		return nil
	case n.NetID != nil:
		v := *n.NetID
		return &v
	case n.Type == estuaryv1.NetworkTypeOverlay:
		v := int64(VNI(n))
		return &v
	}
	return nil
}

// NATOutgoing says whether traffic from subnet sn of a network of type t to
// outside the cluster is masqueraded: spec.natOutgoing when set, else on
// for Overlay and off for Underlay.
func NATOutgoing(t estuaryv1.NetworkType, sn *estuaryv1.SubnetSpec) bool {
	if sn.NATOutgoing != nil {
		return *sn.NATOutgoing
	}
	return t == estuaryv1.NetworkTypeOverlay
}

// Attached reports whether network n reaches a node with these labels: the
// Overlay and GlobalBGP networks reach every node, an Underlay network the nodes its
// nodeSelector matches. An Underlay network without a selector (which the
// CRD refuses) reaches every node, as DomainSelector then adds no domain to
// its pods either.
func Attached(n *estuaryv1.Network, nodeLabels map[string]string) bool {
	sel := DomainSelector(n)
	return sel == nil || labels.SelectorFromSet(sel).Matches(labels.Set(nodeLabels))
}

// DomainSelector returns the node selector a pod with this network must be
// scheduled by: an Underlay network's nodeSelector, nil for any other.
func DomainSelector(n *estuaryv1.Network) map[string]string {
	if n == nil || n.Spec.Type != estuaryv1.NetworkTypeUnderlay || len(n.Spec.NodeSelector) == 0 {
		return nil
	}
	return n.Spec.NodeSelector
}

// OverlayNetwork returns the cluster's Overlay network that is not being
// deleted: the first by name if (against the admission rules) there are
// several.
func OverlayNetwork(nets []estuaryv1.Network) (estuaryv1.Network, bool) {
	return firstOfType(nets, estuaryv1.NetworkTypeOverlay)
}

// GlobalBGPNetwork returns the cluster's GlobalBGP network that is not being
// deleted, as OverlayNetwork does the Overlay one.
func GlobalBGPNetwork(nets []estuaryv1.Network) (estuaryv1.Network, bool) {
	return firstOfType(nets, estuaryv1.NetworkTypeGlobalBGP)
}

func firstOfType(nets []estuaryv1.Network, t estuaryv1.NetworkType) (estuaryv1.Network, bool) {
	var best *estuaryv1.Network
	for i := range nets {
		n := &nets[i]
		if n.Spec.Type == t && n.DeletionTimestamp == nil && (best == nil || n.Name < best.Name) {
			best = n
		}
	}
	if best == nil {
		return estuaryv1.Network{}, false
	}
	return *best, true
}

// SubnetFamily is the family of a subnet's CIDR, or of spec.range.version
// when the CIDR does not parse.
func SubnetFamily(sn *estuaryv1.SubnetSpec) family.Family {
	if p, err := netip.ParsePrefix(sn.Range.CIDR); err == nil {
		return family.Of(p.Addr())
	}
	if f, ok := family.FromVersion(int(sn.Range.Version)); ok {
		return f
	}
	return family.IPv4
}

// SelectorString formats a label selector as {k1=v1,k2=v2}, keys sorted.
func SelectorString(sel map[string]string) string {
	keys := slices.Sorted(maps.Keys(sel))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+sel[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}
