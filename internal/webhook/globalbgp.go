package webhook

// GlobalBGP pods and the BGP networks that announce them. A GlobalBGP
// network has no domain of its own: its addresses are usable on every
// node, but a node's GlobalBGP pods are announced by the speaker of the
// BGP-mode Underlay network whose domain holds the node, and a pod on a
// node of no BGP network fails its CNI ADD (reason bgp_session). So:
//
//   - the pod webhook gives a GlobalBGP pod one required node affinity
//     alternative per BGP network (its nodeSelector, with the GlobalBGP
//     network's availability labels when the pod takes a new address),
//     ORed by the scheduler and crossed with the pod's own terms, as
//     underlayByType does for Underlay by type (AddAlternatives); hybridnet
//     says the same with the node label bgp-network-attachment, which
//     estuary does not publish: the nodeSelectors are the labels that
//     define the domains already. The alternatives are the BGP networks
//     that exist when the pod is created, as for Underlay by type;
//   - a GlobalBGP pod is refused while the cluster has no BGP network:
//     it would have no node to run on;
//   - a BGP network is not deleted while GlobalBGP addresses are in use on
//     its nodes (hybridnet's rule): their routes would vanish with its
//     speaker. Addresses kept for a pod that is gone (no node) do not
//     count.

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// BGPNetworks lists, by name, the BGP-mode Underlay networks with a domain
// that are not being deleted: the networks whose speakers announce
// GlobalBGP pods.
func BGPNetworks(networks []estuaryv1.Network) []*estuaryv1.Network {
	var out []*estuaryv1.Network
	for i := range networks {
		n := &networks[i]
		if n.DeletionTimestamp == nil && netmodel.DomainSelector(n) != nil && netmodel.Mode(&n.Spec) == estuaryv1.NetworkModeBGP {
			out = append(out, n)
		}
	}
	slices.SortFunc(out, func(a, b *estuaryv1.Network) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// GlobalBGPAlternatives returns one node requirement set per BGP network of
// bgp: its domain, and capacity (the GlobalBGP network's availability
// requirements, or none).
func GlobalBGPAlternatives(bgp []*estuaryv1.Network, capacity []corev1.NodeSelectorRequirement) [][]corev1.NodeSelectorRequirement {
	alts := make([][]corev1.NodeSelectorRequirement, 0, len(bgp))
	for _, n := range bgp {
		alts = append(alts, append(requirements(netmodel.DomainSelector(n)), capacity...))
	}
	return alts
}

// globalBGP adds the node affinity of a pod of GlobalBGP network n: the
// domain of some BGP network, and the network's capacity when the pod
// takes a new address. With no BGP network in the cache it reads Live (one
// created a moment ago); with none there either, only the capacity is
// added and the validating webhook refuses the pod.
func (d *PodDefaulter) globalBGP(ctx context.Context, namespace string, pod *corev1.Pod, sel *netmodel.Selection, n *estuaryv1.Network, in podInputs) error {
	bgp := BGPNetworks(in.networks)
	if len(bgp) == 0 && d.Live != nil {
		var networks estuaryv1.NetworkList
		if err := d.Live.List(ctx, &networks); err != nil {
			return internal("list networks", err)
		}
		bgp = BGPNetworks(networks.Items)
	}
	fams := netmodel.FamiliesNeeded(sel, n, in.subnets)
	need, err := d.needsFree(ctx, namespace, pod, sel, in, fams)
	if err != nil {
		return err
	}
	var capacity []corev1.NodeSelectorRequirement
	if need {
		capacity = AvailabilityRequirements(n.Name, fams)
	}
	if len(bgp) == 0 {
		AddRequirements(pod, capacity)
		return nil
	}
	AddAlternatives(pod, GlobalBGPAlternatives(bgp, capacity))
	return nil
}

// CheckGlobalBGPPod refuses a pod of GlobalBGP network n while networks
// hold no BGP network: no node could announce its address.
func CheckGlobalBGPPod(sel *netmodel.Selection, n *estuaryv1.Network, networks []estuaryv1.Network) error {
	if n == nil || n.Spec.Type != estuaryv1.NetworkTypeGlobalBGP || len(BGPNetworks(networks)) > 0 {
		return nil
	}
	return netmodel.Deny(netmodel.KindPod, sel.Pod, "",
		"takes its address from %s network %q, which the speaker of a node's %s-mode %s network announces, and the cluster has no such network: the pod could run on no node; create a BGP network first",
		estuaryv1.NetworkTypeGlobalBGP, n.Name, estuaryv1.NetworkModeBGP, estuaryv1.NetworkTypeUnderlay)
}

// ValidateBGPNetworkDelete refuses to delete BGP network n while an
// IPInstance of a GlobalBGP network of networks is bound to a node of n's
// domain (nodes: the cluster's), naming the first by name, its pod and
// node, and the count.
func ValidateBGPNetworkDelete(n *estuaryv1.Network, networks []estuaryv1.Network, nodes []corev1.Node, instances []estuaryv1.IPInstance) error {
	if netmodel.DomainSelector(n) == nil || netmodel.Mode(&n.Spec) != estuaryv1.NetworkModeBGP {
		return nil
	}
	global := map[string]bool{}
	for i := range networks {
		if networks[i].Spec.Type == estuaryv1.NetworkTypeGlobalBGP {
			global[networks[i].Name] = true
		}
	}
	domain := labels.SelectorFromSet(n.Spec.NodeSelector)
	onDomain := map[string]bool{}
	for i := range nodes {
		if domain.Matches(labels.Set(nodes[i].Labels)) {
			onDomain[nodes[i].Name] = true
		}
	}
	var used []*estuaryv1.IPInstance
	for i := range instances {
		ipi := &instances[i]
		if global[ipi.Spec.Network] && ipi.Spec.Binding.NodeName != "" && onDomain[ipi.Spec.Binding.NodeName] {
			used = append(used, ipi)
		}
	}
	if len(used) == 0 {
		return nil
	}
	first := slices.MinFunc(used, func(a, b *estuaryv1.IPInstance) int { return cmp.Compare(a.Name, b.Name) })
	count := "1 address"
	if len(used) > 1 {
		count = fmt.Sprintf("%d addresses", len(used))
	}
	b := &first.Spec.Binding
	return netmodel.Deny(netmodel.KindNetwork, n.Name, "",
		"cannot be deleted while %s network %q has %s in use on its nodes, which its speaker announces, among them %s %q (%s, pod %q on node %q); delete those pods first",
		estuaryv1.NetworkTypeGlobalBGP, first.Spec.Network, count, netmodel.KindIPInstance, first.Name, first.Spec.Address.IP,
		b.Namespace+"/"+b.PodName, b.NodeName)
}

// checkBGPDelete applies ValidateBGPNetworkDelete against what r holds.
func checkBGPDelete(ctx context.Context, r client.Reader, n *estuaryv1.Network) error {
	if netmodel.DomainSelector(n) == nil || netmodel.Mode(&n.Spec) != estuaryv1.NetworkModeBGP {
		return nil
	}
	var networks estuaryv1.NetworkList
	if err := r.List(ctx, &networks); err != nil {
		return internal("list networks", err)
	}
	if !slices.ContainsFunc(networks.Items, func(o estuaryv1.Network) bool { return o.Spec.Type == estuaryv1.NetworkTypeGlobalBGP }) {
		return nil
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes, client.MatchingLabels(n.Spec.NodeSelector)); err != nil {
		return internal("list nodes", err)
	}
	var instances estuaryv1.IPInstanceList
	if err := r.List(ctx, &instances); err != nil {
		return internal("list ipinstances", err)
	}
	return ValidateBGPNetworkDelete(n, networks.Items, nodes.Items, instances.Items)
}
