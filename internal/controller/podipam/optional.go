package podipam

// Watches of kinds whose CRDs may be absent (KubeVirt's, OpenKruise's): a
// controller watch of a kind the API server does not serve would stop the
// manager, so these are started by a runnable that looks for each kind
// every optionalPoll and starts its metadata informer once the kind is
// served (KubeVirt or OpenKruise installed after estuary included), or at
// once when the pod controller meets a pod of such a kind (the kind is then
// served, and its owner may be deleted in the next second). Their
// events only queue work: a virtual machine being deleted queues its pool,
// whose reconcile releases what it keeps; an Advanced StatefulSet that
// changes queues its pods' names, as a StatefulSet does. The audit queues
// the same keys anyway, so a missed event costs at most one audit
// interval.

import (
	"context"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kcache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/estuary-cni/estuary/internal/workload"
)

// optionalPoll is how often an absent kind is looked for.
const optionalPoll = 30 * time.Second

// optionalWatches starts the informers of the optional kinds once served.
type optionalWatches struct {
	live   client.Reader
	queue  *queues
	held   *holdings
	cache  cache.Informers
	mapper meta.RESTMapper
	poll   time.Duration
	// seen: a pod of an optional kind was met; look now.
	seen <-chan struct{}
}

// NeedLeaderElection returns true: only the leader's pod controller acts.
func (o *optionalWatches) NeedLeaderElection() bool { return true }

// Start looks for the kinds until each is watched or ctx ends.
func (o *optionalWatches) Start(ctx context.Context) error {
	pending := []schema.GroupVersionKind{
		{Group: workload.GroupKubeVirt, Version: "v1", Kind: workload.KindVirtualMachine},
		{Group: workload.GroupKubeVirt, Version: "v1", Kind: workload.KindVirtualMachineInstance},
		{Group: workload.GroupKruise, Version: "v1beta1", Kind: workload.KindStatefulSet},
	}
	tick := time.NewTicker(o.poll)
	defer tick.Stop()
	for {
		pending = slices.DeleteFunc(pending, func(gvk schema.GroupVersionKind) bool { return o.watch(ctx, gvk) })
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-o.seen:
		}
	}
}

// watch starts the informer of gvk if it is served and this manager may
// list it (an informer that cannot sync would hold up every controller
// started after it); it reports whether it did.
func (o *optionalWatches) watch(ctx context.Context, gvk schema.GroupVersionKind) bool {
	if _, err := o.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		return false
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := o.live.List(ctx, list, client.Limit(1)); err != nil {
		log.FromContext(ctx).Info("not watching an optional kind yet: it cannot be listed", "kind", gvk.String(), "error", err.Error())
		return false
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	inf, err := o.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		log.FromContext(ctx).Error(err, "watch an optional kind", "kind", gvk.String())
		return false
	}
	handlers := kcache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { o.machineChanged(gvk.Kind, obj, false) },
		DeleteFunc: func(obj any) { o.machineChanged(gvk.Kind, obj, true) },
	}
	if gvk.Group == workload.GroupKruise {
		handlers = kcache.ResourceEventHandlerFuncs{
			UpdateFunc: func(_, obj any) { o.setChanged(obj) },
			DeleteFunc: o.setChanged,
		}
	}
	_, err = inf.AddEventHandler(handlers)
	if err != nil {
		log.FromContext(ctx).Error(err, "watch an optional kind", "kind", gvk.String())
		return false
	}
	log.FromContext(ctx).Info("watching an optional kind", "kind", gvk.String())
	return true
}

// objectOf is the object of an informer event, tombstones included.
func objectOf(obj any) (client.Object, bool) {
	if t, ok := obj.(kcache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	o, ok := obj.(client.Object)
	return o, ok
}

// machineChanged queues the pool of a virtual machine (or instance, by
// kind) that is deleted or being deleted.
func (o *optionalWatches) machineChanged(kind string, obj any, deleted bool) {
	m, ok := objectOf(obj)
	if !ok || !deleted && m.GetDeletionTimestamp() == nil {
		return
	}
	o.queue.kickPool(workload.Ref{Namespace: m.GetNamespace(), Kind: kind, Name: m.GetName()})
}

// setChanged queues the pod names holding addresses of an Advanced
// StatefulSet that changed (scaled in, deleted, retention turned off).
func (o *optionalWatches) setChanged(obj any) {
	s, ok := objectOf(obj)
	if !ok {
		return
	}
	for _, key := range o.held.ofSet(workload.KindKruiseStatefulSet, s.GetNamespace(), s.GetName()) {
		o.queue.kick(key)
	}
}
