package podipam

// KubeVirt virtual machines: a virt-launcher pod is controlled by a
// VirtualMachineInstance, itself controlled by a VirtualMachine; the
// machine, not the pod, is the workload (package workload), so its
// addresses, and the MAC recorded with them (mac.go), follow it from pod to
// pod:
//
//   - a pod of the machine that is gone leaves its addresses to the
//     machine's pool (vmPolicy), without expiry unless ip-retain-ttl says
//     otherwise, and the machine's next pod takes them there (pool.go);
//     ip-retain: "false" releases them with the pod;
//   - they are released once the machine is gone: the VirtualMachine, or,
//     for a VirtualMachineInstance no VirtualMachine controls, the
//     instance. The pool's reconcile checks the machine, and is queued when
//     a machine is deleted (optionalWatches) and by every audit;
//   - live migration. KubeVirt starts the target pod while the source pod
//     still runs, and the target's sandbox must come up before the memory
//     is copied, so the target cannot wait for the source to end. The rule
//     is hybridnet's: the newer pod of the machine takes the addresses from
//     the older one as soon as it is scheduled (takeFromPredecessor), with
//     one conditional update of each record (held by the older pod, Bound),
//     so the API holds one record per address at every moment, naming one
//     pod and one node. Every other node routes and resolves the address
//     to the node the record names, so from the hand-over on, traffic from
//     outside the source node reaches the target only; the source pod keeps
//     the address inside its own namespace, and its own node keeps its local
//     route to it, until it ends (KubeVirt's source virt-launcher exits
//     once the guest runs on the target), as it does in hybridnet. The
//     guest itself is active on one side at a time: KubeVirt pauses the
//     source before the target resumes. An older pod never takes the
//     addresses back from a newer one: it gets nothing and an event says
//     where they went. Newer is by creation time; within its one-second
//     resolution, KubeVirt's migration target label decides (supersedes).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/workload"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// ReasonAddressMoved is the event reason when an older pod of a virtual
// machine finds the machine's addresses with a newer pod.
const ReasonAddressMoved = "AddressMovedToNewerPod"

// vmPolicy keeps a virtual machine pod's addresses for the machine while it
// exists.
type vmPolicy struct{ r *Reconciler }

func (p vmPolicy) keeps(ctx context.Context, _ string, held []holding) (bool, error) {
	if held[0].retain == nil {
		return false, nil
	}
	gone, err := p.r.machineGone(ctx, held[0].owner)
	return !gone, err
}

func (vmPolicy) poolKey(_ string, held []holding) string { return held[0].owner.Key() }

// machineGone: the VirtualMachine or VirtualMachineInstance ref names is
// deleted or being deleted (or KubeVirt is not installed), read live (see
// workload.LiveOptional).
func (r *Reconciler) machineGone(ctx context.Context, ref workload.Ref) (bool, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(schema.GroupVersionKind{Group: workload.GroupKubeVirt, Version: "v1", Kind: ref.Kind})
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, meta)
	switch {
	case apierrors.IsNotFound(err), apimeta.IsNoMatchError(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get %s: %w", ref, err)
	}
	return meta.DeletionTimestamp != nil, nil
}

// releaseIfMachineGone releases what the pool of a virtual machine (key,
// its workload's key) keeps once the machine is gone; done reports that it
// did. Reserved addresses stay: a reservation may precede its machine, and
// ends only by hand (or with the namespace).
func (r *Reconciler) releaseIfMachineGone(ctx context.Context, key string) (done bool, err error) {
	ref, ok := workload.ParseKey(key)
	if !ok || !workload.IsVM(ref.Kind) {
		return false, nil
	}
	gone, err := r.machineGone(ctx, ref)
	if err != nil || !gone {
		return false, err
	}
	kept := r.held.takeInHand(key, func(hd holding, _ []holding) bool { return !hd.reserved })
	if len(kept) == 0 {
		return false, nil
	}
	log.FromContext(ctx).Info("virtual machine deleted: releasing the addresses kept for it", "workload", key, "addresses", addrs(kept))
	return true, r.releaseTaken(ctx, key, kept)
}

// takeFromPredecessor hands pod key, a pod of virtual machine f.owner that
// holds nothing, the addresses an older pod of the same machine holds (a
// live migration's source, or a pod still stopping after its instance was
// restarted). handled reports that the pod's allocation ends here: it took
// them, or a newer pod has them, or a holder is gone and its addresses are
// on their way to the machine's pool.
func (r *Reconciler) takeFromPredecessor(ctx context.Context, key string, pod *corev1.Pod, f facts) (handled bool, res ctrl.Result, err error) {
	if !workload.IsVM(f.owner.Kind) {
		return false, ctrl.Result{}, nil
	}
	holders := r.held.boundOf(f.owner, key)
	if len(holders) == 0 {
		return false, ctrl.Result{}, nil
	}
	// One pod holds a machine's addresses at a time; should two (a lost
	// write), the first settles before the next pass looks at the other.
	from := holders[0]
	ns, name := splitKey(from)
	holder := &corev1.Pod{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, holder); {
	case apierrors.IsNotFound(err):
		holder = nil
	case err != nil:
		return true, ctrl.Result{}, fmt.Errorf("get pod %s, holding addresses of %s: %w", from, f.owner, err)
	}
	if holder == nil || podFinished(holder) {
		// Its own reconcile hands them to the pool; look again then.
		for _, hd := range r.held.get(from) {
			r.waitFor(hd.name, client.ObjectKeyFromObject(pod))
		}
		r.kick(from)
		return true, ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if !supersedes(pod, holder) {
		r.Events.Eventf(pod, holder, corev1.EventTypeWarning, ReasonAddressMoved, "Allocate",
			"the addresses of %s are with pod %s, which is newer than pod %s; this pod gets none", f.owner, from, key)
		return true, ctrl.Result{}, nil
	}
	return true, ctrl.Result{}, r.moveBound(ctx, from, key, pod, f)
}

// labelMigrationTarget is the label KubeVirt puts on a live migration's
// target pod.
const labelMigrationTarget = "kubevirt.io/migrationJobUID"

// supersedes: pod is newer than holder, so it takes the machine's
// addresses. Creation times have a resolution of one second; at the same
// second a migration's target (labelMigrationTarget) supersedes a pod that
// is none, and otherwise the holder keeps them, so two pods never hand them
// back and forth.
func supersedes(pod, holder *corev1.Pod) bool {
	tp, th := pod.CreationTimestamp.Time, holder.CreationTimestamp.Time
	if !tp.Equal(th) {
		return th.Before(tp)
	}
	_, target := pod.Labels[labelMigrationTarget]
	_, holderTarget := holder.Labels[labelMigrationTarget]
	return target && !holderTarget
}

// moveBound moves every address pod from holds to pod key, each record
// first (a conditional update: still Bound to from), memory after. A
// record that is not held by from any more goes where it says (giveTo).
func (r *Reconciler) moveBound(ctx context.Context, from, key string, pod *corev1.Pod, f facts) error {
	taken := r.held.take(from, func(holding, []holding) bool { return true })
	mac := podMAC(f.mac, taken)
	var got []holding
	for i, was := range taken {
		hd := was
		hd.podUID, hd.node, hd.pod, hd.phase = string(pod.UID), pod.Spec.NodeName, pod.Name, estuaryv1.IPInstanceBound
		hd.owner, hd.retain, hd.expires, hd.mac = f.owner, f.retain, time.Time{}, mac
		err := r.writeBinding(ctx, key, hd, heldBy(from, estuaryv1.IPInstanceBound))
		if err == nil {
			err = r.Alloc.Transfer(hd.lease.Subnet, hd.lease.Addr, from, key, ipam.Allocated)
		}
		if err != nil {
			for _, back := range taken[i+1:] {
				r.held.add(from, back)
			}
			r.held.set(key, got)
			if he, ok := asHeldElsewhere(err); ok {
				return errors.Join(err, r.giveTo(ctx, from, was, he.record))
			}
			r.held.add(from, was)
			return fmt.Errorf("move %s of %s from pod %s to pod %s: %w", hd.lease.Addr, f.owner, from, key, err)
		}
		hd.recorded = time.Now()
		got = append(got, hd)
		r.held.set(key, got)
	}
	log.FromContext(ctx).Info("virtual machine's addresses moved to its newer pod", "workload", f.owner.Key(), "from", from, "to", key, "addresses", addrs(got))
	return nil
}

// boundOf lists the pod keys other than except holding Bound addresses of
// workload owner, oldest holding first.
func (h *holdings) boundOf(owner workload.Ref, except string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var keys []string
	for key, hs := range h.byKey {
		if key == except || isPoolKey(key) {
			continue
		}
		if slices.ContainsFunc(hs, func(hd holding) bool { return hd.phase == estuaryv1.IPInstanceBound && hd.owner.Same(owner) }) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	return keys
}
