package webhook

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// ValidateNetwork checks n against the cluster's other networks and its
// nodes: at most one Overlay network and one GlobalBGP network, no two
// Underlay domains sharing a node or an identical selector (so a node has at
// most one BGP network, whose speaker announces its GlobalBGP pods), at
// least one peer for a BGP network, and a retention namespace selector that
// parses.
// networks may include n itself (matched by name); it is skipped.
func ValidateNetwork(n *estuaryv1.Network, networks []estuaryv1.Network, nodes []corev1.Node) error {
	others := othersThan(n.Name, networks)
	errs := []error{checkUnique(n, others), checkBGPPeers(n), checkNetworkSelectors(n)}
	errs = append(errs, checkDomain(n, others, nodes)...)
	return errors.Join(errs...)
}

// ValidateNetworkDelete refuses to delete a network that still has subnets,
// naming one of them.
func ValidateNetworkDelete(n *estuaryv1.Network, subnets []estuaryv1.Subnet) error {
	var names []string
	for i := range subnets {
		if subnets[i].Spec.Network == n.Name {
			names = append(names, subnets[i].Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return netmodel.Deny(netmodel.KindNetwork, n.Name, "", "cannot be deleted while %s %q (spec.network %q) belongs to it%s; delete the network's subnets first",
		netmodel.KindSubnet, names[0], n.Name, more(len(names)-1))
}

func more(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" (and %d more)", n)
}

func othersThan(name string, networks []estuaryv1.Network) []estuaryv1.Network {
	others := make([]estuaryv1.Network, 0, len(networks))
	for i := range networks {
		if networks[i].Name != name {
			others = append(others, networks[i])
		}
	}
	slices.SortFunc(others, func(a, b estuaryv1.Network) int { return cmp.Compare(a.Name, b.Name) })
	return others
}

// checkUnique refuses a second Overlay or GlobalBGP network, naming the
// existing one.
func checkUnique(n *estuaryv1.Network, others []estuaryv1.Network) error {
	t := n.Spec.Type
	if t != estuaryv1.NetworkTypeOverlay && t != estuaryv1.NetworkTypeGlobalBGP {
		return nil
	}
	for i := range others {
		if others[i].Spec.Type == t {
			article := "a"
			if t == estuaryv1.NetworkTypeOverlay {
				article = "an"
			}
			return netmodel.Deny(netmodel.KindNetwork, n.Name, "spec.type", "%s: the cluster already has %s %s network, %s %q, and may have only one",
				t, article, t, netmodel.KindNetwork, others[i].Name)
		}
	}
	return nil
}

func checkBGPPeers(n *estuaryv1.Network) error {
	if n.Spec.Type != estuaryv1.NetworkTypeUnderlay || netmodel.Mode(&n.Spec) != estuaryv1.NetworkModeBGP || len(n.Spec.BGPPeers) > 0 {
		return nil
	}
	return netmodel.Deny(netmodel.KindNetwork, n.Name, "spec.bgpPeers", "is empty: a BGP network needs at least one peer")
}

// checkDomain returns one denial per other Underlay network whose domain
// shares a node with n's, or whose selector is identical to n's.
func checkDomain(n *estuaryv1.Network, others []estuaryv1.Network, nodes []corev1.Node) []error {
	if n.Spec.Type != estuaryv1.NetworkTypeUnderlay || len(n.Spec.NodeSelector) == 0 {
		return nil
	}
	sorted := slices.Clone(nodes)
	slices.SortFunc(sorted, func(a, b corev1.Node) int { return cmp.Compare(a.Name, b.Name) })
	mine := labels.SelectorFromSet(n.Spec.NodeSelector)
	var errs []error
	for i := range others {
		o := &others[i]
		if o.Spec.Type != estuaryv1.NetworkTypeUnderlay || len(o.Spec.NodeSelector) == 0 {
			continue
		}
		if maps.Equal(o.Spec.NodeSelector, n.Spec.NodeSelector) {
			errs = append(errs, netmodel.Deny(netmodel.KindNetwork, n.Name, "spec.nodeSelector", "%s is identical to %s %q's: two Underlay networks must not share nodes",
				netmodel.SelectorString(n.Spec.NodeSelector), netmodel.KindNetwork, o.Name))
			continue
		}
		if node := sharedNode(mine, labels.SelectorFromSet(o.Spec.NodeSelector), sorted); node != "" {
			errs = append(errs, netmodel.Deny(netmodel.KindNetwork, n.Name, "spec.nodeSelector", "%s selects node %q, which is already in the domain of %s %q (nodeSelector %s): two Underlay networks must not share nodes",
				netmodel.SelectorString(n.Spec.NodeSelector), node, netmodel.KindNetwork, o.Name, netmodel.SelectorString(o.Spec.NodeSelector)))
		}
	}
	return errs
}

// sharedNode is the first node both selectors match, or "".
func sharedNode(a, b labels.Selector, nodes []corev1.Node) string {
	for i := range nodes {
		set := labels.Set(nodes[i].Labels)
		if a.Matches(set) && b.Matches(set) {
			return nodes[i].Name
		}
	}
	return ""
}
