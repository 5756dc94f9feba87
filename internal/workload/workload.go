// Package workload owns the answer to "whose addresses are these": the
// top-level owner of a pod, by which the manager keeps a gone pod's addresses
// for the next pod of the same workload, the webhook checks that an address
// a pod asks for is not another workload's, and kubectl estuary lists a
// workload's addresses.
//
// A pod's top-level owner is found by following controller references: a
// ReplicaSet controlled by a Deployment gives the Deployment, a Job
// controlled by a CronJob gives the CronJob, a KubeVirt
// VirtualMachineInstance controlled by a VirtualMachine gives the
// VirtualMachine, any other controller (a StatefulSet, an OpenKruise
// Advanced StatefulSet, a DaemonSet, a ReplicationController, a ReplicaSet,
// Job or VirtualMachineInstance of its own, a configured kind: see
// Configure) is the owner itself, and a pod without a controller owns its
// own addresses.
//
// KubeVirt's and OpenKruise's kinds are Optional: their CRDs may be absent
// (a reference to a kind the API server does not serve is not followed), so
// their informers are not started up front; only their metadata is read.
// An Advanced StatefulSet is known by the kind KindKruiseStatefulSet
// (StatefulSet.apps.kruise.io), so it never shares a key with an apps/v1
// StatefulSet of the same name.
//
// The API server checks neither the kind nor the name of an owner
// reference, so every owner followed must exist with the UID the reference
// names: a pod whose controller does not (deleted, or a forged reference)
// is its own workload, and a ReplicaSet or Job whose controller does not is
// the workload itself. A pod therefore cannot take the addresses a
// Deployment keeps by naming it. Only the kinds of Owners (the apps and
// batch controllers, and core's ReplicationController), Optional and
// Configured can be checked; a pod of any other controller is its own
// workload. Only their metadata is read, from a cache whose informers
// Watch starts, so the lookup costs no API call on the allocation path.
//
// An owner is known by namespace, kind and name, never by UID alone: a
// Deployment (or ReplicationController) deleted and created again is the
// same workload, and its new pods take the addresses the old ones left.
package workload

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
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
	// KindReplicationController is core/v1's ReplicationController.
	KindReplicationController = "ReplicationController"
	// KindKruiseStatefulSet is OpenKruise's Advanced StatefulSet
	// (apps.kruise.io), named with its group.
	KindKruiseStatefulSet = "StatefulSet.apps.kruise.io"
	// KubeVirt's kinds (kubevirt.io).
	KindVirtualMachine         = "VirtualMachine"
	KindVirtualMachineInstance = "VirtualMachineInstance"
)

// API groups of the optional kinds.
const (
	GroupKubeVirt = "kubevirt.io"
	GroupKruise   = "apps.kruise.io"
)

// IsStateful reports whether kind keeps addresses by ordinal (a StatefulSet, an
// Advanced StatefulSet, or a configured kind with ordinal names).
func IsStateful(kind string) bool {
	return kind == KindStatefulSet || kind == KindKruiseStatefulSet || isOrdinalKind(kind)
}

// IsVM reports whether kind is a KubeVirt VirtualMachine or VirtualMachineInstance, whose
// addresses follow the machine from pod to pod.
func IsVM(kind string) bool { return kind == KindVirtualMachine || kind == KindVirtualMachineInstance }

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

// Of returns pod's top-level owner, reading the metadata of each owner it
// follows from r (see the package comment): an owner not found, or found
// with another UID, is not followed. Any other read failure is returned.
func Of(ctx context.Context, r client.Reader, pod *corev1.Pod) (Ref, error) {
	self := Ref{Namespace: pod.Namespace, Kind: KindPod, Name: pod.Name, UID: string(pod.UID)}
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return self, nil
	}
	meta, err := verified(ctx, r, pod.Namespace, ref)
	if err != nil {
		return self, fmt.Errorf("read %s %s/%s, controller of pod %s/%s: %w", ref.Kind, pod.Namespace, ref.Name, pod.Namespace, pod.Name, err)
	}
	if meta == nil {
		return self, nil
	}
	own := Ref{Namespace: pod.Namespace, Kind: refKind(kindOf(ref)), Name: ref.Name, UID: string(ref.UID)}
	parent := metav1.GetControllerOf(meta)
	if parent == nil || !isParent(kindOf(ref), kindOf(parent)) {
		return own, nil
	}
	switch pm, err := verified(ctx, r, pod.Namespace, parent); {
	case err != nil:
		return own, fmt.Errorf("read %s %s/%s, controller of %s %s/%s: %w", parent.Kind, pod.Namespace, parent.Name, ref.Kind, pod.Namespace, ref.Name, err)
	case pm == nil:
		return own, nil
	}
	return Ref{Namespace: pod.Namespace, Kind: refKind(kindOf(parent)), Name: parent.Name, UID: string(parent.UID)}, nil
}

// refKind is the Kind a workload of group and kind gk is known by.
func refKind(gk schema.GroupKind) string {
	if k, ok := configuredKind(gk); ok {
		return k.RefKind()
	}
	if gk == (schema.GroupKind{Group: GroupKruise, Kind: KindStatefulSet}) {
		return KindKruiseStatefulSet
	}
	return gk.Kind
}

// Owners are the controller kinds Of can verify, and so follow.
var Owners = []schema.GroupVersionKind{
	appsv1.SchemeGroupVersion.WithKind(KindReplicaSet),
	appsv1.SchemeGroupVersion.WithKind(KindDeployment),
	appsv1.SchemeGroupVersion.WithKind(KindStatefulSet),
	appsv1.SchemeGroupVersion.WithKind(KindDaemonSet),
	batchv1.SchemeGroupVersion.WithKind(KindJob),
	batchv1.SchemeGroupVersion.WithKind(KindCronJob),
	corev1.SchemeGroupVersion.WithKind(KindReplicationController),
}

// Optional are the controller kinds Of also verifies, whose CRDs may not be
// installed: KubeVirt's VirtualMachineInstance and VirtualMachine, and
// OpenKruise's Advanced StatefulSet (read at v1beta1, which every
// OpenKruise release serving v1alpha1 serves too). Watch does not start
// their informers; read them through LiveOptional.
var Optional = []schema.GroupVersionKind{
	{Group: GroupKubeVirt, Version: "v1", Kind: KindVirtualMachineInstance},
	{Group: GroupKubeVirt, Version: "v1", Kind: KindVirtualMachine},
	{Group: GroupKruise, Version: "v1beta1", Kind: KindStatefulSet},
}

// LiveOptional is a reader that reads the Optional kinds from live (the API
// server) and everything else from cached. A cache reading a kind starts
// its informer, and one that cannot sync (a kind served but not readable)
// would hold up every controller started after it; a live read fails
// alone, and costs one request per virt-launcher or Advanced StatefulSet
// pod whose owner is looked up.
func LiveOptional(cached, live client.Reader) client.Reader {
	return liveOptional{Reader: cached, live: live}
}

type liveOptional struct {
	client.Reader
	live client.Reader
}

func (l liveOptional) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk := obj.GetObjectKind().GroupVersionKind()
	switch gvk.Group {
	case GroupKubeVirt, GroupKruise:
		return l.live.Get(ctx, key, obj, opts...)
	}
	if _, ok := configuredKind(gvk.GroupKind()); ok {
		return l.live.Get(ctx, key, obj, opts...)
	}
	return l.Reader.Get(ctx, key, obj, opts...)
}

// parents maps a kind to the kind of the controller that makes it part of
// a larger workload.
var parents = map[schema.GroupKind]schema.GroupKind{
	{Group: appsv1.GroupName, Kind: KindReplicaSet}:          {Group: appsv1.GroupName, Kind: KindDeployment},
	{Group: batchv1.GroupName, Kind: KindJob}:                {Group: batchv1.GroupName, Kind: KindCronJob},
	{Group: GroupKubeVirt, Kind: KindVirtualMachineInstance}: {Group: GroupKubeVirt, Kind: KindVirtualMachine},
}

// isParent: a controller of kind parent makes an object of kind child part
// of a larger workload: one of parents, or a configured kind controlling a
// ReplicaSet (an Argo Rollout's, say).
func isParent(child, parent schema.GroupKind) bool {
	if parents[child] == parent {
		return true
	}
	_, ok := configuredKind(parent)
	return ok && child == schema.GroupKind{Group: appsv1.GroupName, Kind: KindReplicaSet}
}

// kindOf is the group and kind an owner reference names; the zero
// GroupKind when its apiVersion does not parse.
func kindOf(ref *metav1.OwnerReference) schema.GroupKind {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return schema.GroupKind{}
	}
	return schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
}

// verified reads, from r, the metadata of the object ref names in
// namespace, at the version Owners or Optional lists: nil when ref's kind is not listed, its kind is not
// served, or no such object exists with ref's UID.
func verified(ctx context.Context, r client.Reader, namespace string, ref *metav1.OwnerReference) (*metav1.PartialObjectMetadata, error) {
	gvk, ok := known(ref)
	if !ok || ref.UID == "" {
		return nil, nil
	}
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(gvk)
	switch err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, meta); {
	case apierrors.IsNotFound(err), apimeta.IsNoMatchError(err):
		return nil, nil
	case err != nil:
		return nil, err
	case meta.UID != ref.UID:
		return nil, nil
	}
	return meta, nil
}

// known is the listed kind ref names, at the version listed.
func known(ref *metav1.OwnerReference) (schema.GroupVersionKind, bool) {
	gk := kindOf(ref)
	if k, ok := configuredKind(gk); ok {
		return k.GVK(), true
	}
	all := slices.Concat(Owners, Optional)
	i := slices.IndexFunc(all, func(gvk schema.GroupVersionKind) bool { return gvk.GroupKind() == gk })
	if i < 0 {
		return schema.GroupVersionKind{}, false
	}
	return all[i], true
}

// Watch starts, in c, the metadata informers of every kind of Owners, so
// that Of reads a synced cache from the start rather than starting an
// informer (one list) on the first pod. Call it before the cache starts;
// it needs get, list and watch on those kinds.
func Watch(ctx context.Context, c cache.Informers) error {
	for _, gvk := range Owners {
		meta := &metav1.PartialObjectMetadata{}
		meta.SetGroupVersionKind(gvk)
		if _, err := c.GetInformer(ctx, meta); err != nil {
			return fmt.Errorf("watch %s metadata: %w", gvk.Kind, err)
		}
	}
	return nil
}

// StatefulOrdinal is the StatefulSet (or Advanced StatefulSet) that
// controls pod and the pod's ordinal, read from its name (<set>-<ordinal>),
// as the manager keeps a StatefulSet's addresses; ok is false for any other
// pod.
func StatefulOrdinal(pod *corev1.Pod) (set string, ordinal int32, ok bool) {
	_, set, ordinal, ok = StatefulController(pod)
	return set, ordinal, ok
}

// StatefulController is StatefulOrdinal with the kind of the set
// (KindStatefulSet or KindKruiseStatefulSet).
func StatefulController(pod *corev1.Pod) (kind, set string, ordinal int32, ok bool) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return "", "", 0, false
	}
	switch k, configured := configuredKind(kindOf(ref)); {
	case configured && k.Ordinal:
		kind = k.RefKind()
	case ref.Kind != KindStatefulSet:
		return "", "", 0, false
	case strings.HasPrefix(ref.APIVersion, appsv1.GroupName+"/"):
		kind = KindStatefulSet
	case strings.HasPrefix(ref.APIVersion, GroupKruise+"/"):
		kind = KindKruiseStatefulSet
	default:
		return "", "", 0, false
	}
	suffix, ok := strings.CutPrefix(pod.Name, ref.Name+"-")
	if !ok {
		return "", "", 0, false
	}
	n, err := strconv.ParseInt(suffix, 10, 32)
	if err != nil || n < 0 {
		return "", "", 0, false
	}
	return kind, ref.Name, int32(n), true
}

// Pooled reports whether an address in phase, of an owner of kind, is held
// in its workload's pool (under the workload's key) rather than by a pod:
// every Reserved address, and a Retained one of any workload but a
// StatefulSet (or Advanced StatefulSet), whose addresses stay with each
// pod's name.
func Pooled(phase estuaryv1.IPInstancePhase, kind string) bool {
	return phase == estuaryv1.IPInstanceReserved || phase == estuaryv1.IPInstanceRetained && !IsStateful(kind)
}

// PoolOf is the workload whose pool holds ipi, if it is Pooled.
func PoolOf(ipi *estuaryv1.IPInstance) (Ref, bool) {
	b := &ipi.Spec.Binding
	if b.Owner.Kind == "" || b.Owner.Name == "" || !Pooled(ipi.Status.Phase, b.Owner.Kind) {
		return Ref{}, false
	}
	return Ref{Namespace: b.Namespace, Kind: b.Owner.Kind, Name: b.Owner.Name, UID: b.Owner.UID}, true
}
