package webhook

// Underlay by type: a pod asking for an Underlay network without naming one
// (netmodel.Selection.ByType) runs on a node of any Underlay domain its
// namespace may use with a free address of each family it needs, and takes
// the network of its node (the manager resolves it once the pod is bound).
//
// The webhook says so with one required node affinity term per candidate
// network: the network's nodeSelector and, unless the pod is bound already,
// its availability labels (AvailabilityRequirements) for the families the
// pod takes from that network (its ip-family, the cluster's default
// family, or the network's own families). Terms are ORed by the scheduler,
// so the pod fits a node of any domain with room; the requirements a pod
// brings are ANDed into each alternative. The labels are the ones the node
// label controller writes anyway, so nothing new is published; the price is
// that the candidates are the Underlay networks that exist when the pod is
// created (its affinity cannot change later), which is also when its
// namespace's rights are read.
//
// A StatefulSet's pod whose name holds addresses already gets them back
// wherever it runs, so it is pinned to the domain of their network, as if
// it named it.

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/workload"
)

// underlayByType adds the node affinity of a pod asking for Underlay by
// type: one alternative per candidate network (see UnderlayAlternatives),
// or the domain of the network its name holds addresses in.
func (d *PodDefaulter) underlayByType(ctx context.Context, namespace string, pod *corev1.Pod, sel *netmodel.Selection, in podInputs) error {
	nets := netmodel.UnderlayNetworks(sel, in.networks, in.subnets)
	if len(nets) == 0 {
		return nil
	}
	rec, err := heldRecord(ctx, d.Reader, namespace, pod)
	if err != nil {
		return err
	}
	if rec != nil {
		for _, n := range nets {
			if n.Name == rec.Spec.Network {
				AddDomainAffinity(pod, netmodel.DomainSelector(n))
				return nil
			}
		}
	}
	AddAlternatives(pod, UnderlayAlternatives(sel, nets, in.subnets, pod.Spec.NodeName == ""))
	return nil
}

// UnderlayAlternatives returns, per network of nets, the node requirements
// of a pod with this selection on that network: its domain (nodeSelector)
// and, when withRoom, a free address of each family the pod needs from it.
// A network that has none of the families the pod needs is left out.
func UnderlayAlternatives(sel *netmodel.Selection, nets []*estuaryv1.Network, subnets []estuaryv1.Subnet, withRoom bool) [][]corev1.NodeSelectorRequirement {
	alts := make([][]corev1.NodeSelectorRequirement, 0, len(nets))
	for _, n := range nets {
		fams := netmodel.FamiliesNeeded(sel, n, subnets)
		if len(fams) == 0 {
			continue
		}
		reqs := requirements(netmodel.DomainSelector(n))
		if withRoom {
			reqs = append(reqs, AvailabilityRequirements(n.Name, fams)...)
		}
		alts = append(alts, reqs)
	}
	return alts
}

// AddAlternatives makes the pod's required node affinity hold one of alts
// besides what it requires already: each term of the pod's becomes one
// term per alternative, the term's requirements ANDed with the
// alternative's; a pod without terms gets one per alternative. It reports
// whether the pod changed; when every term already holds all requirements
// of some alternative, nothing changes, so a second call is a no-op. No
// alternatives leave the pod as it is.
func AddAlternatives(pod *corev1.Pod, alts [][]corev1.NodeSelectorRequirement) bool {
	if len(alts) == 0 {
		return false
	}
	if len(alts) == 1 {
		return AddRequirements(pod, alts[0])
	}
	var terms []corev1.NodeSelectorTerm
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	if len(terms) > 0 && !slices.ContainsFunc(terms, func(t corev1.NodeSelectorTerm) bool { return !holdsOne(t, alts) }) {
		return false
	}
	if len(terms) == 0 {
		terms = []corev1.NodeSelectorTerm{{}}
	}
	out := make([]corev1.NodeSelectorTerm, 0, len(terms)*len(alts))
	for _, t := range terms {
		for _, alt := range alts {
			nt := *t.DeepCopy()
			for _, r := range alt {
				if !hasRequirement(nt.MatchExpressions, r) {
					nt.MatchExpressions = append(nt.MatchExpressions, r)
				}
			}
			out = append(out, nt)
		}
	}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: out}
	return true
}

// holdsOne: term has every requirement of one of alts.
func holdsOne(term corev1.NodeSelectorTerm, alts [][]corev1.NodeSelectorRequirement) bool {
	return slices.ContainsFunc(alts, func(alt []corev1.NodeSelectorRequirement) bool {
		return !slices.ContainsFunc(alt, func(r corev1.NodeSelectorRequirement) bool { return !hasRequirement(term.MatchExpressions, r) })
	})
}

// byType: the pod asks for Underlay by type and some network may be its,
// so the cache has what resolving it needs.
func (in *podInputs) byType(sel *netmodel.Selection) bool {
	return sel.ByType() && len(netmodel.UnderlayNetworks(sel, in.networks, in.subnets)) > 0
}

// heldRecord returns an IPInstance its StatefulSet keeps for the pod's name
// (nil if none): such a pod gets those addresses back.
func heldRecord(ctx context.Context, r client.Reader, namespace string, pod *corev1.Pod) (*estuaryv1.IPInstance, error) {
	kind, set, _, ok := workload.StatefulController(pod)
	if !ok || pod.Name == "" {
		return nil, nil
	}
	var instances estuaryv1.IPInstanceList
	if err := r.List(ctx, &instances, client.MatchingFields{IndexIPInstancePod: namespace + "/" + pod.Name}); err != nil {
		return nil, internal("list ipinstances", err)
	}
	for i := range instances.Items {
		b := &instances.Items[i].Spec.Binding
		if b.Namespace == namespace && b.PodName == pod.Name && b.Owner.Kind == kind && b.Owner.Name == set {
			return &instances.Items[i], nil
		}
	}
	return nil, nil
}

// checkByType applies the pod rules that need a network to a pod asking for
// Underlay by type, against every network it may get: the retention it
// asks for must be allowed on each. Fixed addresses (ip-address, ip-pool)
// belong to one network, so such a pod must name it.
func (v *PodValidator) checkByType(sel *netmodel.Selection, fx *netmodel.Fixed, pod *corev1.Pod, in podInputs) error {
	if fx.Wants() {
		return netmodel.Deny(netmodel.KindPod, sel.Pod, "metadata.annotations["+estuaryv1.AnnotationNetwork+"]",
			"is not set and the pod asks for an %s network by type, which is its node's; fixed addresses (%s, %s) lie in one network: name it, or a subnet",
			estuaryv1.NetworkTypeUnderlay, estuaryv1.AnnotationIPAddress, estuaryv1.AnnotationIPPool)
	}
	for _, n := range netmodel.UnderlayNetworks(sel, in.networks, in.subnets) {
		if err := fx.CheckRetention(v.Bounds, n, statefulPod(pod)); err != nil {
			return err
		}
	}
	return nil
}
