package netmodel

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
)

// ValidatePod checks what the pod asks for (see SelectionFor and
// ResolveNetwork) against the cluster's networks and subnets. A pod that asks
// for nothing, or runs in the host's network, is not checked.
func ValidatePod(pod *corev1.Pod, ns *corev1.Namespace, networks []estuaryv1.Network, subnets []estuaryv1.Subnet) error {
	if pod.Spec.HostNetwork {
		return nil
	}
	sel, err := SelectionFor(pod, ns)
	if err != nil {
		return err
	}
	_, err = ResolveNetwork(&sel, networks, subnets)
	return err
}

// ResolveNetwork returns the network a pod with this selection gets: the
// named network, else the named subnets' network, else the Overlay network;
// nil for a pod asking for Underlay by type (ByType), whose network is its
// node's (NodeUnderlay), when some Underlay network may be it.
// Named networks and subnets must exist, the subnets (any number of each
// family, tried in order by the allocator) must all belong to that network,
// the network's type must be the requested one, the network and any
// named private subnet must allow the pod's namespace, and the network must
// have a public subnet of each family of the cluster's default family the
// pod takes (Defaults). It returns nil and no
// error when the selection is empty and the cluster has no Overlay network.
func ResolveNetwork(sel *Selection, networks []estuaryv1.Network, subnets []estuaryv1.Subnet) (*estuaryv1.Network, error) {
	if sel.ByType() {
		return nil, resolveByType(sel, networks, subnets)
	}
	name, err := networkOfSubnets(sel, subnets)
	if err != nil {
		return nil, err
	}
	n, err := findNetwork(sel, name, networks)
	if n == nil || err != nil {
		return nil, err
	}
	if sel.NetworkType != "" && n.Spec.Type != sel.NetworkType {
		hint := ""
		if name == "" {
			hint = " (no network or subnet is named, so the pod gets the Overlay network)"
		}
		return nil, sel.deny(estuaryv1.AnnotationNetworkType, "%s does not match %s %q, whose spec.type is %s%s",
			sel.NetworkType, KindNetwork, n.Name, n.Spec.Type, hint)
	}
	if err := allowsNamespace(sel, n); err != nil {
		return nil, err
	}
	if err := allowsSubnets(sel, subnets); err != nil {
		return nil, err
	}
	if err := checkDefaultFamily(sel, n, subnets); err != nil {
		return nil, err
	}
	return n, nil
}

// allowsNamespace refuses a network whose spec.namespaces does not list the
// pod's namespace, naming the annotation that selected the network.
func allowsNamespace(sel *Selection, n *estuaryv1.Network) error {
	if len(n.Spec.Namespaces) == 0 || slices.Contains(n.Spec.Namespaces, sel.Namespace) {
		return nil
	}
	why := fmt.Sprintf("%s %q may be used only by pods of the namespaces in its spec.namespaces %v, not %q",
		KindNetwork, n.Name, n.Spec.Namespaces, sel.Namespace)
	switch {
	case sel.Network != "":
		return sel.deny(estuaryv1.AnnotationNetwork, "selects %s", why)
	case len(sel.Subnets) > 0:
		return sel.deny(estuaryv1.AnnotationSubnet, "selects a subnet of %s", why)
	}
	return Deny(KindPod, sel.Pod, "metadata.namespace", "gets the default network: %s", why)
}

// networkOfSubnets checks the named subnets and returns the network they
// select: the named network, or the subnets' own. Every named subnet must
// exist and belong to that one network; several may be of one family.
func networkOfSubnets(sel *Selection, subnets []estuaryv1.Subnet) (string, error) {
	var first *estuaryv1.Subnet
	for _, name := range sel.Subnets {
		s := findSubnet(name, subnets)
		switch {
		case s == nil:
			return "", sel.deny(estuaryv1.AnnotationSubnet, "names %s %q, which does not exist", KindSubnet, name)
		case sel.Network != "" && s.Spec.Network != sel.Network:
			return "", sel.deny(estuaryv1.AnnotationSubnet, "names %s %q, whose spec.network is %q, not the requested network %q",
				KindSubnet, name, s.Spec.Network, sel.Network)
		case first != nil && s.Spec.Network != first.Spec.Network:
			return "", sel.deny(estuaryv1.AnnotationSubnet, "names %s %q and %s %q, whose spec.network differ (%q, %q)",
				KindSubnet, first.Name, KindSubnet, s.Name, first.Spec.Network, s.Spec.Network)
		case first == nil:
			first = s
		}
	}
	if sel.Network == "" && first != nil {
		return first.Spec.Network, nil
	}
	return sel.Network, nil
}

func findSubnet(name string, subnets []estuaryv1.Subnet) *estuaryv1.Subnet {
	for i := range subnets {
		if subnets[i].Name == name {
			return &subnets[i]
		}
	}
	return nil
}

// findNetwork returns the named network, or when name is empty the
// GlobalBGP network for a pod asking for that type and the Overlay network
// for any other.
func findNetwork(sel *Selection, name string, networks []estuaryv1.Network) (*estuaryv1.Network, error) {
	byType := estuaryv1.NetworkTypeOverlay
	if sel.NetworkType == estuaryv1.NetworkTypeGlobalBGP {
		byType = estuaryv1.NetworkTypeGlobalBGP
	}
	for i := range networks {
		n := &networks[i]
		if name != "" && n.Name == name || name == "" && n.Spec.Type == byType {
			return n, nil
		}
	}
	switch {
	case name == "" && byType == estuaryv1.NetworkTypeGlobalBGP:
		return nil, sel.deny(estuaryv1.AnnotationNetworkType, "%s: no network or subnet is named and the cluster has no GlobalBGP network", sel.NetworkType)
	case name != "" && sel.Network != "":
		return nil, sel.deny(estuaryv1.AnnotationNetwork, "names %s %q, which does not exist", KindNetwork, name)
	case name != "":
		return nil, sel.deny(estuaryv1.AnnotationSubnet, "names a subnet of %s %q, which does not exist", KindNetwork, name)
	case sel.NetworkType != "":
		return nil, sel.deny(estuaryv1.AnnotationNetworkType, "%s: no network or subnet is named and the cluster has no Overlay network to default to", sel.NetworkType)
	case !sel.Empty():
		return nil, sel.deny(estuaryv1.AnnotationNetwork, "is not set and the cluster has no Overlay network to default to")
	}
	return nil, nil
}

// FamiliesNeeded lists, IPv4 first, the families a pod with this selection
// takes a new address of from the pool of network n, as the manager's
// allocator resolves them: the families of the ip-family annotation, else
// the cluster's default family (Defaults), else every family n has a public
// (non-private) subnet of. A pod that names its subnets needs none: the
// availability labels describe the network's public pool, not one subnet
// (which may be private).
func FamiliesNeeded(sel *Selection, n *estuaryv1.Network, subnets []estuaryv1.Subnet) []family.Family {
	if len(sel.Subnets) > 0 {
		return nil
	}
	if fams := sel.WantedFamilies(); fams != nil {
		return fams
	}
	return publicFamilies(n, subnets)
}
