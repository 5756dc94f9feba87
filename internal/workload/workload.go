// Package workload owns the answer to "whose addresses are these": the
// top-level owner of a pod, by which the manager keeps a gone pod's addresses
// for the next pod of the same workload, the webhook checks that an address
// a pod asks for is not another workload's, and kubectl estuary lists a
// workload's addresses.
//
// A pod's top-level owner is found by following controller references: a
// ReplicaSet controlled by a Deployment gives the Deployment, a Job
// controlled by a CronJob gives the CronJob, any other controller (a
// StatefulSet, a DaemonSet, a ReplicaSet or Job of its own, a custom
// controller) is the owner itself, and a pod without a controller owns its
// own addresses. Only the metadata of ReplicaSets and Jobs is read, from a
// cache, so the lookup costs no API call on the allocation path.
//
// An owner is known by namespace, kind and name, never by UID alone: a
// Deployment deleted and created again is the same workload, and its new
// pods take the addresses the old ones left.
package workload

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// Kinds with a meaning of their own.
const (
	KindPod         = "Pod"
	KindStatefulSet = "StatefulSet"
	KindDeployment  = "Deployment"
	KindReplicaSet  = "ReplicaSet"
	KindJob         = "Job"
	KindCronJob     = "CronJob"
	KindDaemonSet   = "DaemonSet"
)

// Ref is a workload: the top-level owner of a pod.
type Ref struct {
	Namespace string
	Kind      string
	Name      string
	UID       string
}

// Key is the workload's identity, namespace/Kind/name. It never equals a
// pod's namespace/name key, which has one slash.
func (r Ref) Key() string { return r.Namespace + "/" + r.Kind + "/" + r.Name }

// String is Kind namespace/name, for messages.
func (r Ref) String() string { return r.Kind + " " + r.Namespace + "/" + r.Name }

// Same reports whether r and o are one workload (UIDs aside).
func (r Ref) Same(o Ref) bool {
	return r.Namespace == o.Namespace && r.Kind == o.Kind && r.Name == o.Name
}

// ParseKey is the inverse of Key; ok is false for a pod key.
func ParseKey(key string) (Ref, bool) {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return Ref{}, false
	}
	return Ref{Namespace: parts[0], Kind: parts[1], Name: parts[2]}, true
}

// Of returns pod's top-level owner, reading the metadata of its ReplicaSet
// or Job from r. A ReplicaSet or Job that cannot be found (deleted already)
// is taken as the owner itself; any other read failure is returned.
func Of(ctx context.Context, r client.Reader, pod *corev1.Pod) (Ref, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return Ref{Namespace: pod.Namespace, Kind: KindPod, Name: pod.Name, UID: string(pod.UID)}, nil
	}
	own := Ref{Namespace: pod.Namespace, Kind: ref.Kind, Name: ref.Name, UID: string(ref.UID)}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return own, nil //nolint:nilerr // an unparsable apiVersion names no parent to follow
	}
	var parentKind string
	switch {
	case gv.Group == "apps" && ref.Kind == KindReplicaSet:
		parentKind = KindDeployment
	case gv.Group == "batch" && ref.Kind == KindJob:
		parentKind = KindCronJob
	default:
		return own, nil
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(gv.WithKind(ref.Kind))
	switch err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, meta); {
	case apierrors.IsNotFound(err):
		return own, nil
	case err != nil:
		return own, fmt.Errorf("read %s %s/%s, controller of pod %s/%s: %w", ref.Kind, pod.Namespace, ref.Name, pod.Namespace, pod.Name, err)
	}
	if parent := metav1.GetControllerOf(meta); parent != nil && parent.Kind == parentKind {
		return Ref{Namespace: pod.Namespace, Kind: parent.Kind, Name: parent.Name, UID: string(parent.UID)}, nil
	}
	return own, nil
}

// Pooled reports whether an address in phase, of an owner of kind, is held
// in its workload's pool (under the workload's key) rather than by a pod:
// every Reserved address, and a Retained one of any workload but a
// StatefulSet, whose addresses stay with each pod's name.
func Pooled(phase estuaryv1.IPInstancePhase, kind string) bool {
	return phase == estuaryv1.IPInstanceReserved || phase == estuaryv1.IPInstanceRetained && kind != KindStatefulSet
}

// PoolOf is the workload whose pool holds ipi, if it is Pooled.
func PoolOf(ipi *estuaryv1.IPInstance) (Ref, bool) {
	b := &ipi.Spec.Binding
	if b.Owner.Kind == "" || b.Owner.Name == "" || !Pooled(ipi.Status.Phase, b.Owner.Kind) {
		return Ref{}, false
	}
	return Ref{Namespace: b.Namespace, Kind: b.Owner.Kind, Name: b.Owner.Name, UID: b.Owner.UID}, true
}
