package podipam

// KubeVirt virtual machines: a virt-launcher pod is controlled by a
// VirtualMachineInstance, itself controlled by a VirtualMachine; the
// machine, not the pod, is the workload (package workload), so its
// addresses, and the MAC recorded with them (ledger.go), follow it from pod to
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
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/workload"
)

// ReasonAddressMoved is the event reason when an older pod of a virtual
// machine finds the machine's addresses with a newer pod.
const ReasonAddressMoved = "AddressMovedToNewerPod"

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
	fromPod, _ := podOf(from)
	holder := &corev1.Pod{}
	switch err := r.client.Get(ctx, fromPod, holder); {
	case apierrors.IsNotFound(err):
		holder = nil
	case err != nil:
		return true, ctrl.Result{}, fmt.Errorf("get pod %s, holding addresses of %s: %w", from, f.owner, err)
	}
	if holder == nil || podFinished(holder) {
		// Its own reconcile hands them to the pool; look again then.
		for _, hd := range r.held.get(from) {
			r.queue.waitFor(hd.name, client.ObjectKeyFromObject(pod))
		}
		r.queue.kick(from)
		return true, ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if !supersedes(pod, holder) {
		r.events.Eventf(pod, holder, corev1.EventTypeWarning, ReasonAddressMoved, "Allocate",
			"the addresses of %s are with pod %s, which is newer than pod %s; this pod gets none", f.owner, from, key)
		return true, ctrl.Result{}, nil
	}
	return true, ctrl.Result{}, r.ledger.moveBound(ctx, from, key, pod, f)
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
