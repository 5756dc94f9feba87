package podipam

// Controller kinds configured as workloads (workload.Configure, the
// manager's --workload-kinds): their objects are read live and only as
// metadata, so estuary needs no Go types of theirs and no watch. A kind
// with ordinal names keeps each pod's addresses for the pod of the same
// name, as a StatefulSet does (by default, as --default-ip-retain says,
// unless the pod or its namespace says ip-retain), for as long as the
// owner exists: its scale is not read, so an ordinal the owner no longer
// has is released when the owner goes, or when ip-retain-ttl passes. The
// audit looks at every kept pod name again, so the owner's deletion is
// seen within an audit interval.

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/workload"
)

// ReasonOwnerUnverified is the event reason on a pod whose controller is
// of a configured kind (--workload-kinds) that could not be verified: the
// kind is not served, or no object of it exists with the UID the pod's
// owner reference names. The pod is its own workload.
const ReasonOwnerUnverified = "OwnerUnverified"

// configuredWantsOrdinal is setWantsOrdinal for a configured kind: its
// owner exists and is not being deleted (or is, with its pods orphaned).
func (rt *retainer) configuredWantsOrdinal(ctx context.Context, ns string, kind workload.Kind, set *setRef) (bool, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(kind.GVK())
	switch err := rt.live.Get(ctx, client.ObjectKey{Namespace: ns, Name: set.name}, meta); {
	case apierrors.IsNotFound(err), apimeta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("get %s %s/%s: %w", kind.RefKind(), ns, set.name, err)
	}
	return meta.DeletionTimestamp == nil || slices.Contains(meta.Finalizers, metav1.FinalizerOrphanDependents), nil
}

// ordinalKept: the pod of a configured ordinal kind keeps its addresses for
// its name, as its ip-retain (pod or namespace) says, else as the cluster's
// default for StatefulSets does. Always true for a StatefulSet, whose rule
// reads its template when the pod is gone.
func ordinalKept(set *setRef, fx *netmodel.Fixed, defaults netmodel.Defaults) bool {
	if _, ok := workload.ConfiguredByRefKind(set.kind); !ok {
		return true
	}
	if fx.Retain != nil {
		return *fx.Retain
	}
	return !defaults.NoStatefulRetain
}

// reportUnverified records ReasonOwnerUnverified on pod when its controller
// is of a configured kind and owner, its verified workload, is the pod
// itself.
func (p *planner) reportUnverified(ctx context.Context, pod *corev1.Pod, owner workload.Ref) {
	kind, ref, ok := workload.ConfiguredController(pod)
	if !ok || owner.Kind != workload.KindPod {
		return
	}
	log.FromContext(ctx).Info("controller of a configured workload kind not verified: the pod is its own workload",
		"pod", pod.Namespace+"/"+pod.Name, "kind", kind.RefKind(), "name", ref.Name, "uid", ref.UID)
	p.events.Eventf(pod, nil, corev1.EventTypeWarning, ReasonOwnerUnverified, "Allocate",
		"controller %s %s/%s (uid %s) was not found, or its kind %s is not served: the pod's addresses are its own, not the workload's",
		kind.RefKind(), pod.Namespace, ref.Name, ref.UID, kind.GVK())
}
