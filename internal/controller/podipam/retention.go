package podipam

// Retention: what becomes of a pod's addresses when the pod is gone.
//
// A retention policy decides it per kind of owner. statefulPolicy keeps a
// StatefulSet pod's addresses under the pod's own key (its replacement has
// the same name) for as long as the StatefulSet has the pod's ordinal and
// does not say ip-retain=false. workloadPolicy keeps the addresses of a pod
// of any other workload whose pod asked for it (ip-retain=true), under the
// workload's key (namespace/Kind/name), where the next pod of the same
// workload takes them first (see pool.go). An address an administrator
// reserved goes back to its workload as Reserved whatever the policy says.
//
// A namespace being deleted takes every address kept or reserved in it
// along: its pods' addresses are released rather than kept, and its pools
// and kept pod names release what they hold.
//
// A kept address may expire: ip-retain-ttl (default 24h outside a
// StatefulSet) is turned into status.expiresAt when the address is kept,
// so the deadline survives a manager restart; the key's reconcile releases
// it then. Every hand-over is one record update, written before memory
// changes: a manager that stops between the two rebuilds from the record.

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/workload"
)

// retainer applies the retention rules: what becomes of the addresses of a
// pod name whose pod is gone, and when a workload's kept addresses go.
type retainer struct {
	client   client.Client // cached reads of namespaces and StatefulSets
	live     client.Reader // live reads of namespaces, machines, Advanced StatefulSets
	defaults netmodel.Defaults
	held     *holdings
	ledger   *ledger
}

// defaultRetainTTL is how long a workload keeps a gone pod's addresses
// when its pods retain without saying for how long.
const defaultRetainTTL = 24 * time.Hour

// retentionPolicy decides, for one kind of owner, whether the addresses of
// a pod that is gone are kept, and under which key.
type retentionPolicy interface {
	// keeps reports whether held, the addresses of the gone pod key, are
	// kept.
	keeps(ctx context.Context, key string, held []holding) (bool, error)
	// poolKey is the key kept addresses are held under.
	poolKey(key string, held []holding) string
}

// policyFor is the policy of the owner of held.
func (rt *retainer) policyFor(held []holding) retentionPolicy {
	if held[0].set != nil {
		return statefulPolicy{rt: rt}
	}
	if workload.IsVM(held[0].owner.Kind) {
		return vmPolicy{rt: rt}
	}
	return workloadPolicy{}
}

// statefulPolicy keeps a StatefulSet pod's addresses for the pod of the same
// ordinal.
type statefulPolicy struct{ rt *retainer }

func (p statefulPolicy) keeps(ctx context.Context, key string, held []holding) (bool, error) {
	return p.rt.setWantsOrdinal(ctx, key, held[0].set)
}

func (statefulPolicy) poolKey(key string, _ []holding) string { return key }

// workloadPolicy keeps the addresses of a pod that asked for retention for
// the next pod of its workload.
type workloadPolicy struct{}

func (workloadPolicy) keeps(_ context.Context, _ string, held []holding) (bool, error) {
	return held[0].retain != nil, nil
}

func (workloadPolicy) poolKey(key string, held []holding) string {
	if held[0].owner.Kind == "" {
		return key
	}
	return held[0].owner.Key()
}

// letGo handles a pod name with no live pod: reserved addresses go back to
// their workload, the others are kept as the owner's policy says or
// released. Kept addresses under the pod's own key are released once they
// expire.
func (rt *retainer) letGo(ctx context.Context, key string, held []holding) (ctrl.Result, error) {
	if len(held) == 0 {
		return ctrl.Result{}, nil
	}
	if gone, err := rt.namespaceGone(ctx, key); err != nil || gone {
		if err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, rt.ledger.release(ctx, key, held)
	}
	var reserved, rest []holding
	for _, hd := range held {
		if hd.reserved && hd.owner.Kind != "" {
			reserved = append(reserved, hd)
		} else {
			rest = append(rest, hd)
		}
	}
	if len(reserved) > 0 {
		if err := rt.ledger.toPool(ctx, key, reserved, reserved[0].owner.Key(), estuaryv1.IPInstanceReserved, time.Time{}); err != nil {
			return ctrl.Result{}, err
		}
	}
	if len(rest) == 0 {
		return ctrl.Result{}, nil
	}
	p := rt.policyFor(rest)
	keep, err := p.keeps(ctx, key, rest)
	if err != nil || !keep {
		if err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, rt.ledger.release(ctx, key, rest)
	}
	if pk := p.poolKey(key, rest); pk != key {
		return ctrl.Result{}, rt.ledger.toPool(ctx, key, rest, pk, estuaryv1.IPInstanceRetained, rest[0].retain.until(time.Now()))
	}
	now := time.Now()
	rest, err = rt.ledger.retain(ctx, key, rest, rest[0].retain.until(now))
	if err != nil {
		return ctrl.Result{}, err
	}
	left := expiresIn(rest, now)
	if left < 0 {
		log.FromContext(ctx).Info("retention expired", "pod", key, "addresses", addrs(rest))
		return ctrl.Result{}, rt.ledger.release(ctx, key, rest)
	}
	return ctrl.Result{RequeueAfter: left}, nil
}

// namespaceGone: the namespace of key is deleted or being deleted, so
// nothing in it will use a kept or reserved address again. The cache says
// so first; a namespace it does not show is read live before anything is
// released.
func (rt *retainer) namespaceGone(ctx context.Context, key string) (bool, error) {
	name, _ := splitKey(key)
	ns := &corev1.Namespace{}
	err := rt.client.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		err = rt.live.Get(ctx, client.ObjectKey{Name: name}, ns)
	}
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get namespace %s: %w", name, err)
	}
	return ns.DeletionTimestamp != nil, nil
}

// expiresIn is how long until the first of held expires: 0 when none has a
// deadline, negative when one has passed.
func expiresIn(held []holding, now time.Time) time.Duration {
	var first time.Time
	for _, hd := range held {
		if !hd.expires.IsZero() && (first.IsZero() || hd.expires.Before(first)) {
			first = hd.expires
		}
	}
	if first.IsZero() {
		return 0
	}
	if d := first.Sub(now); d != 0 {
		return d
	}
	return -1
}

// setWantsOrdinal: the StatefulSet that owns the addresses still exists, is
// not being deleted (or is being deleted with its pods orphaned, to be
// re-created), still has the ordinal, and keeps addresses (templateKeeps).
// A StatefulSet is known by its namespace and name, not its UID: one deleted with
// --cascade=orphan and created again adopts the same pods, and they keep
// their addresses.
func (rt *retainer) setWantsOrdinal(ctx context.Context, key string, set *setRef) (bool, error) {
	ns, _ := splitKey(key)
	if set.kind == workload.KindKruiseStatefulSet {
		return rt.kruiseWantsOrdinal(ctx, ns, set)
	}
	if kind, ok := workload.ConfiguredByRefKind(set.kind); ok {
		return rt.configuredWantsOrdinal(ctx, ns, kind, set)
	}
	sts := &appsv1.StatefulSet{}
	err := rt.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: set.name}, sts)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get statefulset %s/%s: %w", ns, set.name, err)
	}
	if sts.DeletionTimestamp != nil && !slices.Contains(sts.Finalizers, metav1.FinalizerOrphanDependents) {
		return false, nil
	}
	if !rt.templateKeeps(sts.Spec.Template.ObjectMeta) {
		return false, nil
	}
	return set.ordinal < ptr.Deref(sts.Spec.Replicas, 1), nil
}

// templateKeeps reports whether a stateful workload whose pod template has
// metadata m keeps its pods' addresses for the same ordinal: the
// template's ip-retain (or an alias), else the cluster's default
// (netmodel.Defaults.NoStatefulRetain, the manager's --default-ip-retain).
func (rt *retainer) templateKeeps(m metav1.ObjectMeta) bool {
	if retain := netmodel.TemplateRetain(m); retain != nil {
		return *retain
	}
	return !rt.defaults.NoStatefulRetain
}

// vmPolicy keeps a virtual machine pod's addresses for the machine while it
// exists.
type vmPolicy struct{ rt *retainer }

func (p vmPolicy) keeps(ctx context.Context, _ string, held []holding) (bool, error) {
	if held[0].retain == nil {
		return false, nil
	}
	gone, err := p.rt.machineGone(ctx, held[0].owner)
	return !gone, err
}

func (vmPolicy) poolKey(_ string, held []holding) string { return held[0].owner.Key() }

// machineGone: the VirtualMachine or VirtualMachineInstance ref names is
// deleted or being deleted (or KubeVirt is not installed), read live (see
// workload.LiveOptional).
func (rt *retainer) machineGone(ctx context.Context, ref workload.Ref) (bool, error) {
	meta := &metav1.PartialObjectMetadata{}
	meta.SetGroupVersionKind(schema.GroupVersionKind{Group: workload.GroupKubeVirt, Version: "v1", Kind: ref.Kind})
	err := rt.live.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, meta)
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
func (rt *retainer) releaseIfMachineGone(ctx context.Context, ref workload.Ref) (done bool, err error) {
	if !workload.IsVM(ref.Kind) {
		return false, nil
	}
	key := ref.Key()
	gone, err := rt.machineGone(ctx, ref)
	if err != nil || !gone {
		return false, err
	}
	kept := rt.held.takeInHand(key, func(hd holding, _ []holding) bool { return !hd.reserved })
	if len(kept) == 0 {
		return false, nil
	}
	log.FromContext(ctx).Info("virtual machine deleted: releasing the addresses kept for it", "workload", key, "addresses", addrs(kept))
	return true, rt.ledger.releaseTaken(ctx, key, kept)
}
