package podipam

import (
	"context"
	"errors"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// Event reasons for pods that get no address because they break a rule.
const (
	// ReasonAllocationFailed: the pod asks for something invalid (the
	// admission webhook's pod rules, see netmodel.ResolveNetwork), or the
	// allocator cannot serve it (e.g. its network is full).
	ReasonAllocationFailed = "AllocationFailed"
	// ReasonOutsideNetworkDomain: the pod is on a node its Underlay
	// network's nodeSelector does not match, or, asking for Underlay by
	// type, on a node of no Underlay domain it may use.
	ReasonOutsideNetworkDomain = "OutsideNetworkDomain"
)

// refusal is a pod that breaks an admission rule: it gets no address, the
// reason is reported on it, and it is tried again later, since the objects
// that decide it (Networks, Subnets, the Node's labels) may change.
type refusal struct {
	reason string
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// admit applies the admission webhook's pod rules, so that a pod admitted
// while the webhook was bypassed or raced cannot be given an address the
// webhook would have refused: its network and subnet annotations (its own
// or its namespace's) must parse, exist and agree (netmodel.ResolveNetwork),
// and its node must lie in its Underlay network's domain. A pod asking for
// Underlay by type takes the Underlay network of its node (byNode). It
// returns the pod's selection, read once, with the cluster's defaults (and
// the network of a pod asking by type). ns may be nil.
func (r *Reconciler) admit(ctx context.Context, pod *corev1.Pod, ns *corev1.Namespace) (netmodel.Selection, error) {
	networks, subnets := r.Topology.objects()
	sel, err := netmodel.SelectionFor(pod, ns)
	if err != nil {
		return sel, &refusal{reason: ReasonAllocationFailed, err: err}
	}
	r.Defaults.Apply(&sel)
	if sel.ByType() {
		if err := r.byNode(ctx, pod, &sel, networks); err != nil {
			return sel, err
		}
	}
	n, err := netmodel.ResolveNetwork(&sel, networks, subnets)
	if err != nil {
		return sel, &refusal{reason: ReasonAllocationFailed, err: err}
	}
	if n != nil && n.Spec.Type == estuaryv1.NetworkTypeGlobalBGP && sel.Network == "" && len(sel.Subnets) == 0 {
		// Asked for by type: the cluster's one GlobalBGP network, on any node.
		sel.Network = n.Name
	}
	domain := netmodel.DomainSelector(n)
	if domain == nil {
		return sel, nil
	}
	node := &corev1.Node{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); {
	case apierrors.IsNotFound(err):
		return sel, &refusal{reason: ReasonOutsideNetworkDomain, err: fmt.Errorf(
			"node %q does not exist, so it cannot be checked against network %q's nodeSelector %s",
			pod.Spec.NodeName, n.Name, netmodel.SelectorString(domain))}
	case err != nil:
		return sel, fmt.Errorf("get node %s: %w", pod.Spec.NodeName, err)
	}
	if netmodel.Attached(n, node.Labels) {
		return sel, nil
	}
	return sel, &refusal{reason: ReasonOutsideNetworkDomain, err: fmt.Errorf(
		"node %q is outside the domain of network %q: its labels do not match the network's nodeSelector %s",
		node.Name, n.Name, netmodel.SelectorString(domain))}
}

// byNode binds a pod asking for Underlay by type to the Underlay network of
// its node (netmodel.NodeUnderlay), preferring, should two domains hold the
// node, one with a free address of each family the pod wants. A node of no
// such domain is refused as outside the network domain.
func (r *Reconciler) byNode(ctx context.Context, pod *corev1.Pod, sel *netmodel.Selection, networks []estuaryv1.Network) error {
	node := &corev1.Node{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); {
	case apierrors.IsNotFound(err):
		return &refusal{reason: ReasonOutsideNetworkDomain, err: fmt.Errorf(
			"pod asks for an Underlay network by type and its node %q does not exist, so it has no Underlay network", pod.Spec.NodeName)}
	case err != nil:
		return fmt.Errorf("get node %s: %w", pod.Spec.NodeName, err)
	}
	hasRoom := func(n *estuaryv1.Network) bool {
		for _, f := range sel.WantedFamilies() {
			if st, err := r.Alloc.NetworkStats(n.Name, f); err != nil || st.Available == 0 {
				return false
			}
		}
		return true
	}
	n, err := netmodel.NodeUnderlay(sel, node.Name, node.Labels, networks, hasRoom)
	if err != nil {
		return &refusal{reason: ReasonOutsideNetworkDomain, err: err}
	}
	sel.Bind(n, node.Name)
	return nil
}

// asRefusal returns err's refusal, if it is one.
func asRefusal(err error) (*refusal, bool) {
	var ref *refusal
	ok := errors.As(err, &ref)
	return ref, ok
}

// objects lists the known networks and subnets as the webhook's rules take
// them, sorted by name. The copies share maps and slices with the topology,
// which replaces its objects rather than changing them: callers only read.
func (t *Topology) objects() ([]estuaryv1.Network, []estuaryv1.Subnet) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	networks := make([]estuaryv1.Network, 0, len(t.networks))
	for name, spec := range t.networks {
		networks = append(networks, estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	}
	sort.Slice(networks, func(i, j int) bool { return networks[i].Name < networks[j].Name })
	subnets := make([]estuaryv1.Subnet, 0, len(t.subnets))
	for _, sn := range t.subnets {
		subnets = append(subnets, *sn)
	}
	sort.Slice(subnets, func(i, j int) bool { return subnets[i].Name < subnets[j].Name })
	return networks, subnets
}
