package netmodel

// Cluster defaults and Underlay by type.
//
// Defaults are what the administrator sets for the keys neither a pod nor
// its namespace sets: the network type, the IP family and whether a
// StatefulSet's pod keeps its addresses. The manager holds them (its flags)
// and hands the same value to the webhook and to the allocator, which both
// apply them here (Apply), so a pod is scheduled, admitted and given
// addresses by one rule.
//
// A pod whose network type is Underlay (its own, its namespace's or the
// default) and that names no network and no subnet asks for an Underlay
// network by type (ByType): it may run on a node of any Underlay domain its
// namespace may use that has room, and takes the network of the node it
// lands on (NodeUnderlay). The webhook cannot know that network, so it
// schedules the pod by one node affinity term per candidate network
// (UnderlayNetworks); the manager resolves it once the pod is bound. A
// named network or subnet always wins over a type, and a type written on
// the pod or namespace wins over the default.
//
// The default IP family applies only to a pod that names neither a family
// nor a subnet (named subnets say the families). Network, the default,
// means every family the pod's network has a public subnet of; a concrete
// family the network has no public subnet of is refused, naming both.

import (
	"fmt"
	"slices"
	"strings"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
)

// IPFamilyNetwork is the default IP family that takes every family the
// pod's network has a public subnet of.
const IPFamilyNetwork = "Network"

// Flag names of the defaults, for messages.
const (
	FlagDefaultNetworkType = "--default-network-type"
	FlagDefaultIPFamily    = "--default-ip-family"
	FlagDefaultIPRetain    = "--default-ip-retain"
)

// Defaults are the cluster's defaults for pods that do not say. The zero
// value is estuary's behaviour without defaults: Overlay, every family of
// the network, a StatefulSet's pods keep their addresses.
type Defaults struct {
	// NetworkType is the type of a pod that names no network, subnet or
	// type: Overlay ("" too) or Underlay (by type, see ByType).
	NetworkType estuaryv1.NetworkType
	// IPFamily is the family of a pod that names no family and no subnet:
	// IPv4, IPv6, DualStack, or Network ("" too).
	IPFamily string
	// NoStatefulRetain turns the ip-retain default of a StatefulSet's pod
	// to false (--default-ip-retain=false): its addresses are released
	// with it unless ip-retain is true. Other pods keep addresses only
	// with ip-retain: true either way.
	NoStatefulRetain bool
}

// ParseNetworkType reads a --default-network-type value (case-insensitive).
func ParseNetworkType(v string) (estuaryv1.NetworkType, error) {
	for _, t := range []estuaryv1.NetworkType{estuaryv1.NetworkTypeOverlay, estuaryv1.NetworkTypeUnderlay} {
		if strings.EqualFold(v, string(t)) {
			return t, nil
		}
	}
	return "", fmt.Errorf("%q is not %s or %s", v, estuaryv1.NetworkTypeOverlay, estuaryv1.NetworkTypeUnderlay)
}

// ParseIPFamily reads a --default-ip-family value (case-insensitive).
func ParseIPFamily(v string) (string, error) {
	for _, f := range []string{estuaryv1.IPFamilyIPv4, estuaryv1.IPFamilyIPv6, estuaryv1.IPFamilyDualStack, IPFamilyNetwork} {
		if strings.EqualFold(v, f) {
			return f, nil
		}
	}
	return "", fmt.Errorf("%q is not one of %s, %s, %s, %s", v,
		estuaryv1.IPFamilyIPv4, estuaryv1.IPFamilyIPv6, estuaryv1.IPFamilyDualStack, IPFamilyNetwork)
}

// Apply makes sel take d for what it does not say.
func (d Defaults) Apply(sel *Selection) { sel.defaults = d }

// Type is the type the selection asks for: the network-type key, else
// (when it names no network and no subnet) the cluster's default; "" for
// Overlay by default, which resolves as it always has.
func (s *Selection) Type() estuaryv1.NetworkType {
	switch {
	case s.NetworkType != "":
		return s.NetworkType
	case s.Network == "" && len(s.Subnets) == 0 && s.defaults.NetworkType == estuaryv1.NetworkTypeUnderlay:
		return estuaryv1.NetworkTypeUnderlay
	}
	return ""
}

// ByType reports whether the pod asks for an Underlay network by type:
// Underlay, and no network or subnet named. Its network is the Underlay
// network of the node it runs on.
func (s *Selection) ByType() bool {
	return s.Network == "" && len(s.Subnets) == 0 && s.Type() == estuaryv1.NetworkTypeUnderlay
}

// WantedFamilies lists, IPv4 first, the families the pod asks for: the
// ip-family key, else (when it names no subnet) the cluster's default
// family; nil for every family of its network.
func (s *Selection) WantedFamilies() []family.Family {
	if fams := s.Families(); fams != nil || len(s.Subnets) > 0 {
		return fams
	}
	return (&Selection{IPFamily: s.defaults.IPFamily}).Families()
}

// defaultFamily: the families come from the cluster's default.
func (s *Selection) defaultFamily() bool {
	return s.IPFamily == "" && len(s.Subnets) == 0 && s.WantedFamilies() != nil
}

// checkDefaultFamily refuses a pod that takes the cluster's default family
// when network n has no public subnet of one of its families.
func checkDefaultFamily(sel *Selection, n *estuaryv1.Network, subnets []estuaryv1.Subnet) error {
	if !sel.defaultFamily() {
		return nil
	}
	has := publicFamilies(n, subnets)
	for _, f := range sel.WantedFamilies() {
		if !slices.Contains(has, f) {
			return sel.deny(estuaryv1.AnnotationIPFamily, "is not set, so the pod takes the cluster's default IP family %s (the manager's %s), and %s %q has no public %s subnet; set %s, or name a subnet",
				sel.defaults.IPFamily, FlagDefaultIPFamily, KindNetwork, n.Name, f, estuaryv1.AnnotationIPFamily)
		}
	}
	return nil
}

// publicFamilies lists, IPv4 first, the families network n has a public
// (non-private) subnet of.
func publicFamilies(n *estuaryv1.Network, subnets []estuaryv1.Subnet) []family.Family {
	var has [2]bool
	for i := range subnets {
		s := &subnets[i]
		if s.Spec.Network == n.Name && !s.Spec.Private && s.DeletionTimestamp == nil {
			i, _ := SubnetFamily(&s.Spec).Index()
			has[i] = true
		}
	}
	var fams []family.Family
	for i, f := range []family.Family{family.IPv4, family.IPv6} {
		if has[i] {
			fams = append(fams, f)
		}
	}
	return fams
}

// UnderlayNetworks lists, by name, the Underlay networks a pod asking by
// type may be scheduled to: those of underlayAllowed with a public subnet
// of each family it wants (WantedFamilies), or of any family when it wants
// its network's.
func UnderlayNetworks(sel *Selection, networks []estuaryv1.Network, subnets []estuaryv1.Subnet) []*estuaryv1.Network {
	var out []*estuaryv1.Network
	for _, n := range underlayAllowed(sel, networks) {
		has := publicFamilies(n, subnets)
		want := sel.WantedFamilies()
		if len(has) > 0 && !slices.ContainsFunc(want, func(f family.Family) bool { return !slices.Contains(has, f) }) {
			out = append(out, n)
		}
	}
	return out
}

// underlayAllowed lists, by name, the Underlay networks not being deleted,
// with a domain, that allow the pod's namespace.
func underlayAllowed(sel *Selection, networks []estuaryv1.Network) []*estuaryv1.Network {
	var out []*estuaryv1.Network
	for i := range networks {
		n := &networks[i]
		if n.Spec.Type == estuaryv1.NetworkTypeUnderlay && n.DeletionTimestamp == nil && DomainSelector(n) != nil &&
			(len(n.Spec.Namespaces) == 0 || slices.Contains(n.Spec.Namespaces, sel.Namespace)) {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b *estuaryv1.Network) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// resolveByType checks a pod asking for Underlay by type: some Underlay
// network must be one it may get, with a public subnet of each family it
// wants.
func resolveByType(sel *Selection, networks []estuaryv1.Network, subnets []estuaryv1.Subnet) error {
	if len(UnderlayNetworks(sel, networks, subnets)) > 0 {
		return nil
	}
	why := "is " + string(estuaryv1.NetworkTypeUnderlay)
	if sel.NetworkType == "" {
		why = fmt.Sprintf("is not set, so the pod takes the cluster's default network type %s (the manager's %s)", estuaryv1.NetworkTypeUnderlay, FlagDefaultNetworkType)
	}
	fams := "a public subnet"
	if want := sel.WantedFamilies(); want != nil {
		fams = fmt.Sprintf("a public subnet of each family %v", want)
		if sel.defaultFamily() {
			fams += fmt.Sprintf(" (the cluster's default IP family %s, the manager's %s)", sel.defaults.IPFamily, FlagDefaultIPFamily)
		}
	}
	return sel.deny(estuaryv1.AnnotationNetworkType, "%s and no network or subnet is named, but no %s network with a nodeSelector allows namespace %q and has %s",
		why, estuaryv1.NetworkTypeUnderlay, sel.Namespace, fams)
}

// NodeUnderlay returns the Underlay network of the node a pod asking by
// type runs on: the one allowing its namespace whose domain holds the node
// (nodeLabels). Underlay domains do not share nodes, but should two hold
// it (a node relabelled a moment ago), the first by name that hasRoom for
// the pod wins, else the first. A node of no such domain is an error
// naming the node and the networks.
func NodeUnderlay(sel *Selection, node string, nodeLabels map[string]string, networks []estuaryv1.Network, hasRoom func(*estuaryv1.Network) bool) (*estuaryv1.Network, error) {
	all := underlayAllowed(sel, networks)
	var on []*estuaryv1.Network
	for _, n := range all {
		if Attached(n, nodeLabels) {
			on = append(on, n)
		}
	}
	if len(on) == 0 {
		names := make([]string, 0, len(all))
		for _, n := range all {
			names = append(names, fmt.Sprintf("%s %s", n.Name, SelectorString(n.Spec.NodeSelector)))
		}
		return nil, fmt.Errorf("it asks for an %s network by type and node %q is in the domain of none it may use (%s)",
			estuaryv1.NetworkTypeUnderlay, node, strings.Join(names, ", "))
	}
	for _, n := range on {
		if hasRoom == nil || hasRoom(n) {
			return n, nil
		}
	}
	return on[0], nil
}

// Bind makes a pod asking by type take network n, the Underlay network of
// node, as if it named it.
func (s *Selection) Bind(n *estuaryv1.Network, node string) {
	s.Network, s.boundTo = n.Name, node
}
