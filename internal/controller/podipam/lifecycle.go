package podipam

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// letGo handles a pod name with no live pod: a StatefulSet that still wants
// the pod keeps its addresses (Retained); everything else is released.
func (r *Reconciler) letGo(ctx context.Context, key string, held []holding) error {
	if len(held) == 0 {
		return nil
	}
	if set := held[0].set; set != nil {
		keep, err := r.setWantsOrdinal(ctx, key, set)
		if err != nil {
			return err
		}
		if keep {
			return r.retain(ctx, key, held)
		}
	}
	return r.release(ctx, key, held)
}

// setWantsOrdinal: the StatefulSet that owns the addresses still exists, is
// not being deleted (or is being deleted with its pods orphaned, to be
// re-created), still has the ordinal, and keeps addresses. A StatefulSet is
// known by its namespace and name, not its UID: one deleted with
// --cascade=orphan and created again adopts the same pods, and they keep
// their addresses.
func (r *Reconciler) setWantsOrdinal(ctx context.Context, key string, set *setRef) (bool, error) {
	ns := key[:strings.IndexByte(key, '/')]
	sts := &appsv1.StatefulSet{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: set.name}, sts)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get statefulset %s/%s: %w", ns, set.name, err)
	}
	if sts.DeletionTimestamp != nil && !slices.Contains(sts.Finalizers, metav1.FinalizerOrphanDependents) {
		return false, nil
	}
	if sts.Spec.Template.Annotations[estuaryv1.AnnotationIPRetain] == "false" {
		return false, nil
	}
	return set.ordinal < ptr.Deref(sts.Spec.Replicas, 1), nil
}

// release deletes the records and frees the addresses. A record is deleted
// before its address is freed, so an address is never free while recorded.
func (r *Reconciler) release(ctx context.Context, key string, held []holding) error {
	for i, hd := range held {
		if err := r.deleteInstance(ctx, key, hd); err != nil {
			r.held.set(key, held[i:])
			return err
		}
		if err := r.Alloc.Release(hd.lease.Subnet, hd.lease.Addr, key); err != nil && !errors.Is(err, ipam.ErrNotAllocated) {
			log.FromContext(ctx).Error(err, "release", "pod", key, "address", hd.lease.Addr)
		}
	}
	r.held.set(key, nil)
	log.FromContext(ctx).V(1).Info("released", "pod", key, "addresses", addrs(held))
	return nil
}

func (r *Reconciler) deleteInstance(ctx context.Context, key string, hd holding) error {
	ipi := &estuaryv1.IPInstance{ObjectMeta: metav1.ObjectMeta{Name: hd.name}}
	if err := r.Client.Delete(ctx, ipi); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ipinstance %s of %s: %w", ipi.Name, key, err)
	}
	return nil
}

// retain keeps the addresses for the pod that will replace this one: the
// records lose their node binding and turn Retained.
func (r *Reconciler) retain(ctx context.Context, key string, held []holding) error {
	for i := range held {
		hd := &held[i]
		if hd.phase == estuaryv1.IPInstanceRetained {
			continue
		}
		if err := r.Alloc.Retain(hd.lease.Subnet, hd.lease.Addr, key); err != nil {
			return fmt.Errorf("retain %s for %s: %w", hd.lease.Addr, key, err)
		}
		hd.podUID, hd.node, hd.phase = "", "", estuaryv1.IPInstanceRetained
		if err := r.writeBinding(ctx, key, *hd); err != nil {
			return err
		}
	}
	r.held.set(key, held)
	return nil
}

// rebind hands a StatefulSet pod the addresses held for its name.
func (r *Reconciler) rebind(ctx context.Context, key string, pod *corev1.Pod, held []holding) error {
	for i := range held {
		hd := &held[i]
		if hd.phase == estuaryv1.IPInstanceRetained {
			if err := r.Alloc.Assign(hd.lease.Subnet, hd.lease.Addr, key); err != nil {
				return fmt.Errorf("reclaim retained %s for %s: %w", hd.lease.Addr, key, err)
			}
		}
		hd.podUID, hd.node, hd.phase = string(pod.UID), pod.Spec.NodeName, estuaryv1.IPInstanceBound
		hd.set = statefulOwner(pod)
		if err := r.writeBinding(ctx, key, *hd); err != nil {
			return err
		}
	}
	r.held.set(key, held)
	log.FromContext(ctx).V(1).Info("rebound", "pod", key, "node", pod.Spec.NodeName, "addresses", addrs(held))
	return nil
}

// writeBinding updates a record's binding and phase (one write: the status is
// not a subresource).
func (r *Reconciler) writeBinding(ctx context.Context, key string, hd holding) error {
	ipi := &estuaryv1.IPInstance{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: hd.name}, ipi); err != nil {
		return fmt.Errorf("get ipinstance %s of %s: %w", hd.name, key, err)
	}
	ipi.Spec.Binding.PodUID = hd.podUID
	ipi.Spec.Binding.NodeName = hd.node
	if hd.set != nil {
		ipi.Spec.Binding.Owner.UID = hd.set.uid
	}
	ipi.Status.Phase = hd.phase
	setLabel(ipi, estuaryv1.LabelNode, hd.node)
	if err := r.Client.Update(ctx, ipi); err != nil {
		return fmt.Errorf("update ipinstance %s of %s to %s: %w", hd.name, key, hd.phase, err)
	}
	return nil
}

// instance builds the IPInstance that records hd for pod.
func (r *Reconciler) instance(pod *corev1.Pod, hd holding) *estuaryv1.IPInstance {
	l := hd.lease
	ipi := &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: hd.name,
			Labels: map[string]string{
				estuaryv1.LabelNamespace: pod.Namespace,
				estuaryv1.LabelPod:       pod.Name,
				estuaryv1.LabelSubnet:    l.Subnet,
			},
			Annotations: map[string]string{estuaryv1.AnnotationAddresses: strconv.Itoa(hd.count)},
		},
		Spec: estuaryv1.IPInstanceSpec{
			Network: l.Network,
			Subnet:  l.Subnet,
			Address: estuaryv1.InstanceAddress{
				IP:      netipPrefix(l),
				Version: versionOf(l.Family),
				NetID:   r.Topology.NetID(l.Network, l.Subnet),
			},
			Binding: estuaryv1.Binding{Namespace: pod.Namespace, PodName: pod.Name, PodUID: hd.podUID, NodeName: hd.node},
		},
		Status: estuaryv1.IPInstanceStatus{Phase: hd.phase},
	}
	if l.Gateway.IsValid() {
		ipi.Spec.Address.Gateway = estuaryv1.IPAddress(l.Gateway.String())
	}
	setLabel(ipi, estuaryv1.LabelNode, hd.node)
	// No metadata.ownerReferences: a cluster-scoped record cannot name a
	// namespaced owner for the garbage collector. Records whose pod or owner
	// went while the manager was down are released by the manager itself,
	// on start and by its audit.
	ipi.Spec.Binding.Owner = estuaryv1.OwnerReference{Kind: "Pod", Name: pod.Name, UID: string(pod.UID)}
	if hd.set != nil {
		ipi.Spec.Binding.Owner = estuaryv1.OwnerReference{Kind: "StatefulSet", Name: hd.set.name, UID: hd.set.uid}
		ipi.Spec.Binding.StatefulOrdinal = ptr.To(hd.set.ordinal)
	}
	return ipi
}

func setLabel(ipi *estuaryv1.IPInstance, k, v string) {
	if v == "" {
		delete(ipi.Labels, k)
		return
	}
	if ipi.Labels == nil {
		ipi.Labels = map[string]string{}
	}
	ipi.Labels[k] = v
}

// statefulOwner returns the StatefulSet controlling pod and the pod's
// ordinal, or nil.
func statefulOwner(pod *corev1.Pod) *setRef {
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "StatefulSet" || !strings.HasPrefix(ref.APIVersion, "apps/") {
		return nil
	}
	suffix, ok := strings.CutPrefix(pod.Name, ref.Name+"-")
	if !ok {
		return nil
	}
	n, err := strconv.ParseInt(suffix, 10, 32)
	if err != nil || n < 0 {
		return nil
	}
	return &setRef{name: ref.Name, uid: string(ref.UID), ordinal: int32(n)}
}

// sameSet: the held addresses belong to the StatefulSet (by name) that owns
// the pod.
func sameSet(held []holding, set *setRef) bool {
	return held[0].set != nil && held[0].set.name == set.name
}
