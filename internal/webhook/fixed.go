package webhook

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/workload"
)

// validatePod applies netmodel's pod rules (the selection parses and
// resolves, see netmodel.ValidatePod) and checks the pod's fixed-address
// annotations (see netmodel.FixedFor): every value parses, every address
// lies and is assignable in a subnet of the pod's network, and no address
// the pod names with ip-address is recorded for another workload. The
// selection is read and resolved once for both.
func validatePod(ctx context.Context, r client.Reader, pod *corev1.Pod, in podInputs) error {
	sel, err := netmodel.SelectionFor(pod, in.ns)
	if err != nil {
		return err
	}
	n, err := netmodel.ResolveNetwork(&sel, in.networks, in.subnets)
	if err != nil {
		return err
	}
	fx, err := netmodel.FixedFor(&sel, pod, in.ns)
	if err != nil || !fx.Wants() || n == nil {
		return err
	}
	if _, err := fx.CheckAddresses(n, in.subnets); err != nil {
		return err
	}
	if len(fx.Addresses) == 0 {
		return nil
	}
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

func phaseWord(p estuaryv1.IPInstancePhase) string {
	switch p {
	case estuaryv1.IPInstanceRetained:
		return "kept"
	case estuaryv1.IPInstanceReserved:
		return "reserved"
	}
	return "used"
}
