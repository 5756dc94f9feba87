package webhook

import (
	"context"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/workload"
)

// validatePod applies netmodel's pod rules (the selection parses and
// resolves, see netmodel.ValidatePod) and checks the pod's fixed-address
// annotations (see netmodel.FixedFor): every value parses, the retention it
// asks for is within the administrator's bounds (CheckRetention), every
// address lies and is assignable in a subnet of the pod's network and may
// be claimed by the pod's namespace, none is a Node's address
// (CheckAddresses), and no address the pod names with ip-address is
// recorded for another workload. The selection is read and resolved once
// for all, with the cluster's defaults; a pod asking for Underlay by type
// is checked against every network it may get (checkByType), a GlobalBGP
// pod needs a BGP network (CheckGlobalBGPPod).
func (v *PodValidator) validatePod(ctx context.Context, r client.Reader, pod *corev1.Pod, in podInputs) error {
	sel, err := netmodel.SelectionFor(pod, in.ns)
	if err != nil {
		return err
	}
	v.Defaults.Apply(&sel)
	n, err := netmodel.ResolveNetwork(&sel, in.networks, in.subnets)
	if err != nil {
		return err
	}
	fx, err := netmodel.FixedFor(&sel, pod, in.ns)
	if err != nil {
		return err
	}
	if sel.ByType() {
		return v.checkByType(&sel, &fx, pod, in)
	}
	if err := CheckGlobalBGPPod(&sel, n, in.networks); err != nil {
		return err
	}
	if err := fx.CheckRetention(v.Bounds, n, statefulPod(pod)); err != nil {
		return err
	}
	if !fx.Wants() || n == nil {
		return nil
	}
	nodes, err := nodeAddresses(ctx, r)
	if err != nil {
		return err
	}
	if _, err := fx.CheckAddresses(n, in.subnets, netmodel.Claims{Nodes: nodes, Layouts: v.Layouts}); err != nil {
		return err
	}
	if len(fx.Addresses) == 0 {
		return nil
	}
	return notHeldElsewhere(ctx, r, pod, &fx)
}

// notHeldElsewhere refuses an address of ip-address recorded for another
// workload than the pod's.
func notHeldElsewhere(ctx context.Context, r client.Reader, pod *corev1.Pod, fx *netmodel.Fixed) error {
	owner, err := workload.Of(ctx, r, pod)
	if err != nil {
		return internal("find the pod's workload", err)
	}
	for _, a := range fx.Addresses {
		ipi := &estuaryv1.IPInstance{}
		switch err := r.Get(ctx, client.ObjectKey{Name: estuaryv1.InstanceName(a)}, ipi); {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return internal("get ipinstance "+estuaryv1.InstanceName(a), err)
		}
		b := &ipi.Spec.Binding
		holder := workload.Ref{Namespace: b.Namespace, Kind: b.Owner.Kind, Name: b.Owner.Name}
		if !holder.Same(owner) {
			return fx.DenyHeld(a, holder.String(), phaseWord(ipi.Status.Phase))
		}
	}
	return nil
}

// statefulPod reports whether pod is a StatefulSet's, whose rule keeps its
// addresses (see netmodel.Fixed.CheckRetention).
func statefulPod(pod *corev1.Pod) bool {
	_, _, ok := workload.StatefulOrdinal(pod)
	return ok
}

// nodeAddresses lists the Nodes' addresses, which no pod may name.
func nodeAddresses(ctx context.Context, r client.Reader) (map[netip.Addr]netmodel.NodeAddress, error) {
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, internal("list nodes", err)
	}
	return netmodel.NodeAddresses(nodes.Items), nil
}

func phaseWord(p estuaryv1.IPInstancePhase) string {
	switch p {
	case estuaryv1.IPInstanceRetained:
		return "kept"
	case estuaryv1.IPInstanceReserved:
		return "reserved"
	}
	return "used"
}
