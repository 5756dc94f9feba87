package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/workload"
	"github.com/estuary-cni/estuary/pkg/family"
)

// NetworkValidator admits Networks. Reader is the manager's cache; Live,
// when set, reads the API server and confirms a refused delete (see
// confirmDelete).
type NetworkValidator struct {
	Reader client.Reader
	Live   client.Reader
}

// ValidateCreate applies ValidateNetwork.
func (v *NetworkValidator) ValidateCreate(ctx context.Context, n *estuaryv1.Network) (admission.Warnings, error) {
	return nil, v.validate(ctx, n)
}

// ValidateUpdate applies ValidateNetwork when the spec changes.
func (v *NetworkValidator) ValidateUpdate(ctx context.Context, old, n *estuaryv1.Network) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, n.Spec) {
		return nil, nil
	}
	return nil, v.validate(ctx, n)
}

// ValidateDelete applies ValidateNetworkDelete and, to a BGP network,
// ValidateBGPNetworkDelete.
func (v *NetworkValidator) ValidateDelete(ctx context.Context, n *estuaryv1.Network) (admission.Warnings, error) {
	var subnets estuaryv1.SubnetList
	if err := v.Reader.List(ctx, &subnets, client.MatchingFields{IndexSubnetNetwork: n.Name}); err != nil {
		return nil, internal("list subnets", err)
	}
	err := confirm(ValidateNetworkDelete(n, subnets.Items), v.Live, func(live client.Reader) error {
		var all estuaryv1.SubnetList
		if err := live.List(ctx, &all); err != nil {
			return internal("list subnets", err)
		}
		return ValidateNetworkDelete(n, all.Items)
	})
	if err != nil {
		return nil, err
	}
	return nil, confirm(checkBGPDelete(ctx, v.Reader, n), v.Live, func(live client.Reader) error {
		return checkBGPDelete(ctx, live, n)
	})
}

// confirmDelete returns the cache's verdict on a delete, unless it is a
// refusal and live is set: then the verdict of check against the API
// server. The cache can still hold an object deleted a moment ago (the
// subnet deleted just before its network), and a refusal must hold against
// what exists now; an admitted delete needs no second read.
func confirm(cached error, live client.Reader, check func(client.Reader) error) error {
	var d *netmodel.Denial
	if live == nil || !errors.As(cached, &d) {
		return cached
	}
	return check(live)
}

func (v *NetworkValidator) validate(ctx context.Context, n *estuaryv1.Network) error {
	check := func(r client.Reader) error {
		var networks estuaryv1.NetworkList
		if err := r.List(ctx, &networks); err != nil {
			return internal("list networks", err)
		}
		var nodes corev1.NodeList
		if n.Spec.Type == estuaryv1.NetworkTypeUnderlay {
			if err := r.List(ctx, &nodes); err != nil {
				return internal("list nodes", err)
			}
		}
		return ValidateNetwork(n, networks.Items, nodes.Items)
	}
	return confirm(check(v.Reader), v.Live, check)
}

// SubnetValidator admits Subnets. Reader is the manager's cache; Live, as
// NetworkValidator's, confirms a refused delete.
type SubnetValidator struct {
	Reader client.Reader
	Live   client.Reader
}

// ValidateCreate applies ValidateSubnet.
func (v *SubnetValidator) ValidateCreate(ctx context.Context, s *estuaryv1.Subnet) (admission.Warnings, error) {
	return nil, v.validate(ctx, s)
}

// ValidateUpdate applies ValidateSubnet when the spec changes.
func (v *SubnetValidator) ValidateUpdate(ctx context.Context, old, s *estuaryv1.Subnet) (admission.Warnings, error) {
	if equality.Semantic.DeepEqual(old.Spec, s.Spec) {
		return nil, nil
	}
	return nil, v.validate(ctx, s)
}

// ValidateDelete applies ValidateSubnetDelete.
func (v *SubnetValidator) ValidateDelete(ctx context.Context, s *estuaryv1.Subnet) (admission.Warnings, error) {
	var instances estuaryv1.IPInstanceList
	if err := v.Reader.List(ctx, &instances, client.MatchingFields{IndexIPInstanceSubnet: s.Name}); err != nil {
		return nil, internal("list ipinstances", err)
	}
	return nil, confirm(ValidateSubnetDelete(s, instances.Items), v.Live, func(live client.Reader) error {
		// Every namespace's records, matched on spec.subnet: the API server
		// has no index for it, and a label could be missing.
		var held estuaryv1.IPInstanceList
		if err := live.List(ctx, &held); err != nil {
			return internal("list ipinstances", err)
		}
		return ValidateSubnetDelete(s, held.Items)
	})
}

func (v *SubnetValidator) validate(ctx context.Context, s *estuaryv1.Subnet) error {
	check := func(r client.Reader) error {
		var networks estuaryv1.NetworkList
		if err := r.List(ctx, &networks); err != nil {
			return internal("list networks", err)
		}
		var subnets estuaryv1.SubnetList
		if err := r.List(ctx, &subnets); err != nil {
			return internal("list subnets", err)
		}
		return ValidateSubnet(s, networks.Items, subnets.Items)
	}
	return confirm(check(v.Reader), v.Live, check)
}

// PodValidator admits pods (on create). Reader is the manager's cache;
// Live, when set, confirms a refusal (see confirm). Bounds are the
// administrator's tenancy bounds; Layouts, when set, caches the subnets'
// layouts across requests.
type PodValidator struct {
	Reader  client.Reader
	Live    client.Reader
	Bounds  netmodel.Bounds
	Layouts *netmodel.Layouts
	// Scope says which pods are checked; the others are admitted.
	Scope PodScope
	// Defaults are the cluster's defaults for what a pod does not say,
	// the same the manager allocates by.
	Defaults netmodel.Defaults
}

// ValidateCreate applies validatePod.
func (v *PodValidator) ValidateCreate(ctx context.Context, pod *corev1.Pod) (admission.Warnings, error) {
	if pod.Spec.HostNetwork || !v.Scope.Serves(pod) {
		return nil, nil
	}
	pod.Namespace = podNamespace(ctx, pod)
	check := func(r client.Reader) error {
		in, err := readPodInputs(ctx, r, pod.Namespace)
		if err != nil {
			return err
		}
		return v.validatePod(ctx, r, pod, in)
	}
	return nil, confirm(check(v.Reader), v.Live, check)
}

// ValidateUpdate admits every update: a pod's annotations are read once, when
// its addresses are allocated.
func (v *PodValidator) ValidateUpdate(context.Context, *corev1.Pod, *corev1.Pod) (admission.Warnings, error) {
	return nil, nil
}

// ValidateDelete admits every delete.
func (v *PodValidator) ValidateDelete(context.Context, *corev1.Pod) (admission.Warnings, error) {
	return nil, nil
}

// PodDefaulter adds node affinity for a pod's Underlay network domain (see
// AddDomainAffinity) and for the free capacity of its network (see
// AvailabilityRequirements). Reader is the manager's cache; Live, when set,
// is read when the cache cannot resolve the pod's network (one created a
// moment ago).
type PodDefaulter struct {
	Reader client.Reader
	Live   client.Reader
	// Scope says which pods are defaulted; the others are left alone.
	Scope PodScope
	// Defaults are the cluster's defaults for what a pod does not say.
	Defaults netmodel.Defaults
}

// Default resolves the pod's network and adds to the pod's required node
// affinity the network's domain, if it is an Underlay network, and the
// availability labels of each family the pod takes a new address of. A pod
// asking for Underlay by type gets the alternatives of underlayByType, a
// GlobalBGP pod those of globalBGP. A pod whose network cannot be
// resolved is left alone; the validating webhook refuses it.
func (d *PodDefaulter) Default(ctx context.Context, pod *corev1.Pod) error {
	if pod.Spec.HostNetwork || !d.Scope.Serves(pod) {
		return nil
	}
	namespace := podNamespace(ctx, pod)
	in, err := readPodInputs(ctx, d.Reader, namespace)
	if err != nil {
		return err
	}
	sel, n := in.network(pod, namespace, d.Defaults)
	if n == nil && !in.byType(&sel) && d.Live != nil {
		if in, err = readPodInputs(ctx, d.Live, namespace); err != nil {
			return err
		}
		sel, n = in.network(pod, namespace, d.Defaults)
	}
	if sel.ByType() {
		return d.underlayByType(ctx, namespace, pod, &sel, in)
	}
	if n == nil {
		return nil
	}
	if n.Spec.Type == estuaryv1.NetworkTypeGlobalBGP {
		return d.globalBGP(ctx, namespace, pod, &sel, n, in)
	}
	AddDomainAffinity(pod, netmodel.DomainSelector(n))
	fams := netmodel.FamiliesNeeded(&sel, n, in.subnets)
	need, err := d.needsFree(ctx, namespace, pod, &sel, in, fams)
	if err != nil || !need {
		return err
	}
	AddRequirements(pod, AvailabilityRequirements(n.Name, fams))
	return nil
}

// needsFree reports whether the pod takes new addresses of fams, and so
// must wait for a node with capacity. It does not when it is bound to a
// node already (spec.nodeName: no scheduler places it, and a kubelet would
// fail it outright on a full, or not yet counted, network instead of
// letting it wait for an address), or when its addresses are named
// (ip-address, ip-pool), kept for it under its name (a StatefulSet's), or
// kept or reserved for its workload in every family.
func (d *PodDefaulter) needsFree(ctx context.Context, namespace string, pod *corev1.Pod, sel *netmodel.Selection, in podInputs, fams []family.Family) (bool, error) {
	if pod.Spec.NodeName != "" {
		return false, nil
	}
	if fx, err := netmodel.FixedFor(sel, pod, in.ns); err == nil && fx.Wants() {
		return false, nil
	}
	held, err := holdsAddresses(ctx, d.Reader, namespace, pod)
	if err != nil || held {
		return !held, err
	}
	kept, err := keptForWorkload(ctx, d.Reader, d.Live, namespace, pod, fams)
	return !kept, err
}

type podInputs struct {
	ns       *corev1.Namespace
	networks []estuaryv1.Network
	subnets  []estuaryv1.Subnet
}

// network is the selection and network of pod, created in namespace (the
// request's, which the object may not carry), nil also when the selection
// does not parse or resolve (the validating webhook refuses such a pod)
// and for a pod asking for Underlay by type. d are the cluster's defaults.
func (in *podInputs) network(pod *corev1.Pod, namespace string, d netmodel.Defaults) (netmodel.Selection, *estuaryv1.Network) {
	named := *pod
	named.Namespace = namespace
	sel, err := netmodel.SelectionFor(&named, in.ns)
	if err != nil {
		return sel, nil
	}
	d.Apply(&sel)
	n, err := netmodel.ResolveNetwork(&sel, in.networks, in.subnets)
	if err != nil {
		return sel, nil
	}
	return sel, n
}

// holdsAddresses reports whether the pod, a StatefulSet's, is named by an
// IPInstance that the StatefulSet keeps for it: such a pod gets those
// addresses back, needs no free one, and must not wait for capacity.
func holdsAddresses(ctx context.Context, r client.Reader, namespace string, pod *corev1.Pod) (bool, error) {
	rec, err := heldRecord(ctx, r, namespace, pod)
	return rec != nil, err
}

// keptForWorkload reports whether the pod's workload has an address of
// each family of fams in its pool (Retained for it, or Reserved): its next
// pod takes those before any free one. When the cache confirms none of the
// pod's controller (a ReplicaSet created a moment before its first pod),
// the owners are read again from live: a pod admitted as its own workload
// would wait for free capacity that its workload's kept addresses make
// unnecessary, and its affinity cannot change after admission.
func keptForWorkload(ctx context.Context, r, live client.Reader, namespace string, pod *corev1.Pod, fams []family.Family) (bool, error) {
	if metav1.GetControllerOf(pod) == nil || len(fams) == 0 {
		return false, nil
	}
	p := pod.DeepCopy()
	p.Namespace = namespace
	owner, err := workload.Of(ctx, r, p)
	if err == nil && owner.Kind == workload.KindPod && live != nil {
		owner, err = workload.Of(ctx, live, p)
	}
	if err != nil {
		return false, internal("find the pod's workload", err)
	}
	var instances estuaryv1.IPInstanceList
	if err := r.List(ctx, &instances, client.MatchingFields{IndexIPInstanceWorkload: owner.Key()}); err != nil {
		return false, internal("list ipinstances", err)
	}
	for _, f := range fams {
		if !slices.ContainsFunc(instances.Items, func(ipi estuaryv1.IPInstance) bool {
			return int(ipi.Spec.Address.Version) == f.Version()
		}) {
			return false, nil
		}
	}
	return true, nil
}

// podNamespace is the pod's namespace, taken from the admission request when
// the object does not carry it.
func podNamespace(ctx context.Context, pod *corev1.Pod) string {
	if pod.Namespace == "" {
		if req, err := admission.RequestFromContext(ctx); err == nil {
			return req.Namespace
		}
	}
	return pod.Namespace
}

// readPodInputs reads the namespace (nil if it is not found) and the
// cluster's networks and subnets.
func readPodInputs(ctx context.Context, r client.Reader, namespace string) (podInputs, error) {
	var in podInputs
	ns := &corev1.Namespace{}
	switch err := r.Get(ctx, client.ObjectKey{Name: namespace}, ns); {
	case err == nil:
		in.ns = ns
	case !apierrors.IsNotFound(err):
		return in, internal("get namespace", err)
	}
	var networks estuaryv1.NetworkList
	if err := r.List(ctx, &networks); err != nil {
		return in, internal("list networks", err)
	}
	var subnets estuaryv1.SubnetList
	if err := r.List(ctx, &subnets); err != nil {
		return in, internal("list subnets", err)
	}
	in.networks, in.subnets = networks.Items, subnets.Items
	return in, nil
}

// internal reports a failure to read the cluster's state as a server error,
// so the client sees it is not a verdict on the object.
func internal(what string, err error) error {
	return apierrors.NewInternalError(fmt.Errorf("%s: %w", what, err))
}
