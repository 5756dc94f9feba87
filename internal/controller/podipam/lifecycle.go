package podipam

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/workload"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// release deletes the records and frees the addresses. A record is deleted
// before its address is freed, so an address is never free while recorded;
// a record that another holder took meanwhile is not deleted, and memory
// follows it instead (giveTo).
func (r *Reconciler) release(ctx context.Context, key string, held []holding) error {
	for i, hd := range held {
		err := r.deleteRecord(ctx, key, hd)
		if he, ok := asHeldElsewhere(err); ok {
			err = r.giveTo(ctx, key, hd, he.record)
		} else if err == nil {
			err = r.Alloc.Release(hd.lease.Subnet, hd.lease.Addr, key)
			if err != nil && !errors.Is(err, ipam.ErrNotAllocated) {
				log.FromContext(ctx).Error(err, "release", "pod", key, "address", hd.lease.Addr)
			}
			err = nil
		}
		if err != nil {
			r.held.set(key, held[i:])
			return err
		}
		r.wake(hd.name)
	}
	r.held.set(key, nil)
	log.FromContext(ctx).V(1).Info("released", "pod", key, "addresses", addrs(held))
	return nil
}

// retain keeps the addresses for the pod that will replace this one: the
// records lose their node binding and turn Retained, expiring at until
// (zero: never); then the allocator keeps them. It returns the holdings as
// kept.
func (r *Reconciler) retain(ctx context.Context, key string, held []holding, until time.Time) ([]holding, error) {
	held = slices.Clone(held)
	for i := range held {
		hd := held[i]
		if hd.phase == estuaryv1.IPInstanceRetained {
			continue
		}
		hd.podUID, hd.node, hd.phase, hd.expires = "", "", estuaryv1.IPInstanceRetained, until
		if err := r.writeBinding(ctx, key, hd, heldBy(key, estuaryv1.IPInstanceBound)); err != nil {
			return nil, r.afterFailedWrite(ctx, key, held[i], err)
		}
		if err := r.Alloc.Retain(hd.lease.Subnet, hd.lease.Addr, key); err != nil {
			return nil, fmt.Errorf("retain %s for %s: %w", hd.lease.Addr, key, err)
		}
		held[i] = hd
		r.held.set(key, held)
	}
	return held, nil
}

// rebind hands a StatefulSet pod the addresses held for its name, which
// it has count of in all: each record first, then memory.
func (r *Reconciler) rebind(ctx context.Context, key string, pod *corev1.Pod, held []holding, count int) error {
	held = slices.Clone(held)
	mac := podMAC("", held)
	for i := range held {
		hd := held[i]
		hd.podUID, hd.node, hd.phase, hd.expires = string(pod.UID), pod.Spec.NodeName, estuaryv1.IPInstanceBound, time.Time{}
		hd.set, hd.mac, hd.count = statefulOwner(pod), mac, count
		if err := r.writeBinding(ctx, key, hd, heldBy(key, estuaryv1.IPInstanceRetained, estuaryv1.IPInstanceBound)); err != nil {
			return r.afterFailedWrite(ctx, key, held[i], err)
		}
		if held[i].phase == estuaryv1.IPInstanceRetained {
			if err := r.Alloc.Assign(hd.lease.Subnet, hd.lease.Addr, key); err != nil {
				return fmt.Errorf("reclaim retained %s for %s: %w", hd.lease.Addr, key, err)
			}
		}
		hd.recorded = time.Now()
		held[i] = hd
		r.held.set(key, held)
	}
	log.FromContext(ctx).V(1).Info("rebound", "pod", key, "node", pod.Spec.NodeName, "addresses", addrs(held))
	return nil
}

// afterFailedWrite settles memory after a write of hd's record, held
// under key, failed: a record held elsewhere takes the address with it
// (giveTo); otherwise memory stays as it was, and the next pass reads the
// record again. It returns err.
func (r *Reconciler) afterFailedWrite(ctx context.Context, key string, hd holding, err error) error {
	if he, ok := asHeldElsewhere(err); ok {
		r.held.take(key, func(h holding, _ []holding) bool { return h.name == hd.name })
		if gerr := r.giveTo(ctx, key, hd, he.record); gerr != nil {
			r.held.add(key, hd)
			return errors.Join(err, gerr)
		}
	}
	return err
}

// applyHolding writes what hd says into ipi: the pod, node, owner,
// retention, reservation, MAC, phase and expiry, and, on a Bound record, the
// pod's address count, so that the node waits for every family the pod is
// given and for no other. The address, network and subnet are the record's
// own and never change.
func applyHolding(ipi *estuaryv1.IPInstance, hd holding) {
	b := &ipi.Spec.Binding
	if hd.pod != "" {
		b.PodName = hd.pod
		setLabel(ipi, estuaryv1.LabelPod, hd.pod)
	}
	b.PodUID, b.NodeName = hd.podUID, hd.node
	setLabel(ipi, estuaryv1.LabelNode, hd.node)
	if hd.owner.Kind != "" {
		b.Owner = estuaryv1.OwnerReference{Kind: hd.owner.Kind, Name: hd.owner.Name, UID: hd.owner.UID}
	}
	b.StatefulOrdinal = nil
	if hd.set != nil {
		b.Owner = estuaryv1.OwnerReference{Kind: hd.set.kind, Name: hd.set.name, UID: hd.set.uid}
		b.StatefulOrdinal = ptr.To(hd.set.ordinal)
	}
	ipi.Spec.Retention = nil
	if hd.retain != nil {
		ipi.Spec.Retention = &estuaryv1.Retention{}
		if hd.retain.ttl != nil {
			ipi.Spec.Retention.TTL = &metav1.Duration{Duration: *hd.retain.ttl}
		}
	}
	if hd.count > 0 && hd.phase == estuaryv1.IPInstanceBound {
		if ipi.Annotations == nil {
			ipi.Annotations = map[string]string{}
		}
		ipi.Annotations[estuaryv1.AnnotationAddresses] = strconv.Itoa(hd.count)
	}
	ipi.Spec.Reserved = hd.reserved
	ipi.Spec.Address.MAC = hd.mac
	ipi.Status.Phase = hd.phase
	ipi.Status.ExpiresAt = nil
	if !hd.expires.IsZero() {
		ipi.Status.ExpiresAt = &metav1.Time{Time: hd.expires}
	}
}

// instance builds the IPInstance that records hd for pod.
func (r *Reconciler) instance(pod *corev1.Pod, hd holding) *estuaryv1.IPInstance {
	l := hd.lease
	ipi := &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: hd.name,
			Labels: map[string]string{
				estuaryv1.LabelNamespace: pod.Namespace,
				estuaryv1.LabelSubnet:    l.Subnet,
			},
		},
		Spec: estuaryv1.IPInstanceSpec{
			Network: l.Network,
			Subnet:  l.Subnet,
			Address: estuaryv1.InstanceAddress{
				IP:      netipPrefix(l),
				Version: int32(l.Family.Version()),
				NetID:   r.Topology.NetID(l.Network, l.Subnet),
			},
			Binding: estuaryv1.Binding{Namespace: pod.Namespace, PodName: pod.Name},
		},
	}
	if l.Gateway.IsValid() {
		ipi.Spec.Address.Gateway = estuaryv1.IPAddress(l.Gateway.String())
	}
	// No metadata.ownerReferences: a cluster-scoped record cannot name a
	// namespaced owner for the garbage collector. Records whose pod or owner
	// went while the manager was down are released by the manager itself,
	// on start and by its audit.
	ipi.Spec.Binding.Owner = estuaryv1.OwnerReference{Kind: workload.KindPod, Name: pod.Name, UID: string(pod.UID)}
	if hd.pod == "" {
		hd.pod = pod.Name
	}
	applyHolding(ipi, hd)
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

// statefulOwner returns the StatefulSet (or Advanced StatefulSet)
// controlling pod and the pod's ordinal, or nil.
func statefulOwner(pod *corev1.Pod) *setRef {
	kind, name, ordinal, ok := workload.StatefulController(pod)
	if !ok {
		return nil
	}
	return &setRef{kind: kind, name: name, uid: string(metav1.GetControllerOf(pod).UID), ordinal: ordinal}
}

// sameSet: the held addresses belong to the StatefulSet (by kind and name)
// that owns the pod.
func sameSet(held []holding, set *setRef) bool {
	return held[0].set != nil && held[0].set.kind == set.kind && held[0].set.name == set.name
}
