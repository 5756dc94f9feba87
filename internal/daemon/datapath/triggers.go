package datapath

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/remote"
)

// Trigger asks the loop for a pass. It holds one slot for each kind of
// poke, so pokes that come while a pass is pending cost nothing, and no
// poke blocks. It is made before the loop and its parts, and handed to
// everything that may ask for a pass.
type Trigger struct {
	ch      chan struct{}
	cluster chan struct{}
}

// NewTrigger returns a Trigger with no pass pending.
func NewTrigger() *Trigger {
	return &Trigger{ch: make(chan struct{}, 1), cluster: make(chan struct{}, 1)}
}

// Poke asks for a pass soon: for a change of this node (its endpoints, its
// kernel links, its BGP sessions), which a pod's ADD may be waiting for.
// It never blocks.
func (t *Trigger) Poke() { poke(t.ch) }

// PokeCluster asks for a pass for a change of the cluster's objects (the
// informers' events): the loop paces those passes (Options.Pace), so that
// churn on other nodes costs a bounded share of the node's CPU. A Poke
// while one waits runs it at once. It never blocks.
func (t *Trigger) PokeCluster() { poke(t.cluster) }

func poke(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// watch pokes t (PokeCluster) on every add and delete of a Node, Network,
// Subnet or IPInstance cached in c or a record cached in records, and on
// every update of one that changesDataPath.
func (t *Trigger) watch(ctx context.Context, c, records cache.Cache) error {
	h := t.handler(changesDataPath)
	for _, w := range []struct {
		c   cache.Cache
		obj client.Object
	}{{c, &corev1.Node{}}, {c, &estuaryv1.Network{}}, {c, &estuaryv1.Subnet{}}, {c, &estuaryv1.IPInstance{}},
		{records, &remote.Record{}}} {
		inf, err := w.c.GetInformer(ctx, w.obj)
		if err != nil {
			return fmt.Errorf("informer for %T: %w", w.obj, err)
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("watch %T: %w", w.obj, err)
		}
	}
	return nil
}

// changesDataPath reports whether an update of a cached object from old to
// updated can change what a pass computes, so that updates which cannot
// (a Node's heartbeat and image list, a Subnet's or Network's usage
// counts, an IPInstance's retention fields) do not cost a reconcile each.
// Under a burst of pod starts those are most of the events the loop sees.
// What it compares must stay in step with what translate and the parts read:
//
//   - Node: labels (domains, BGP), annotations (tunnel endpoints, BGP
//     peers) and status addresses (node IPs, the BGP router id);
//   - Network, Subnet: metadata.generation (their spec; status is a
//     subresource and never read), labels, annotations and whether they
//     are being deleted;
//   - IPInstance, remote.Record: the address, the node label and whether
//     it is Bound, which is all translate.NeighTable reads.
//
// Any other type, or a pair of different types, counts as a change.
// Adds and deletes always trigger; so does every resync.
func changesDataPath(old, updated any) bool {
	switch n := updated.(type) {
	case *corev1.Node:
		o, ok := old.(*corev1.Node)
		return !ok || !maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
			!slices.Equal(o.Status.Addresses, n.Status.Addresses)
	case *estuaryv1.Network:
		o, ok := old.(*estuaryv1.Network)
		return !ok || specChanged(o, n)
	case *estuaryv1.Subnet:
		o, ok := old.(*estuaryv1.Subnet)
		return !ok || specChanged(o, n)
	case *remote.Record:
		o, ok := old.(*remote.Record)
		return !ok || o.Spec.Address.IP != n.Spec.Address.IP || o.Node() != n.Node() || o.Bound() != n.Bound()
	case *estuaryv1.IPInstance:
		o, ok := old.(*estuaryv1.IPInstance)
		return !ok || o.Spec.Address.IP != n.Spec.Address.IP ||
			o.Labels[estuaryv1.LabelNode] != n.Labels[estuaryv1.LabelNode] ||
			(o.Status.Phase == estuaryv1.IPInstanceBound) != (n.Status.Phase == estuaryv1.IPInstanceBound)
	}
	return true
}

// specChanged: the object's spec (generation), labels, annotations or
// deletion state differ.
func specChanged(o, n client.Object) bool {
	return o.GetGeneration() != n.GetGeneration() || !maps.Equal(o.GetLabels(), n.GetLabels()) ||
		!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
		(o.GetDeletionTimestamp() == nil) != (n.GetDeletionTimestamp() == nil)
}

// WatchPolicy pokes t (PokeCluster) on every add and delete of a cached NetworkPolicy,
// ClusterNetworkPolicy, Namespace or Pod, and on every update of one that
// changesPolicy; ClusterNetworkPolicies only with admin (the API server
// serves them). The daemon calls it when it enforces policy, before the
// cache starts; its cache holds the node's own pods, and the PodView the
// others' while a policy exists, with the same triggers.
func (t *Trigger) WatchPolicy(ctx context.Context, c cache.Cache, admin bool) error {
	h := t.handler(changesPolicy)
	objs := []client.Object{&networkingv1.NetworkPolicy{}, &corev1.Namespace{}, &corev1.Pod{}}
	if admin {
		objs = append(objs, &npv1beta1.ClusterNetworkPolicy{})
	}
	return watchAll(ctx, c, h, objs)
}

// WatchAdminNetworkPolicies pokes t as WatchPolicy does on
// AdminNetworkPolicies (with anp) and BaselineAdminNetworkPolicies (with
// banp), each only when the API server serves it; the daemon calls it
// with WatchPolicy.
func (t *Trigger) WatchAdminNetworkPolicies(ctx context.Context, c cache.Cache, anp, banp bool) error {
	var objs []client.Object
	if anp {
		objs = append(objs, &npv1alpha1.AdminNetworkPolicy{})
	}
	if banp {
		objs = append(objs, &npv1alpha1.BaselineAdminNetworkPolicy{})
	}
	return watchAll(ctx, c, t.handler(changesPolicy), objs)
}

func watchAll(ctx context.Context, c cache.Cache, h toolscache.ResourceEventHandler, objs []client.Object) error {
	for _, obj := range objs {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("informer for %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("watch %T: %w", obj, err)
		}
	}
	return nil
}

// handler pokes t (PokeCluster) on every add and delete, and on every
// update for which changes is true.
func (t *Trigger) handler(changes func(old, updated any) bool) toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { t.PokeCluster() },
		UpdateFunc: func(old, updated any) {
			if changes(old, updated) {
				t.PokeCluster()
			}
		},
		DeleteFunc: func(any) { t.PokeCluster() },
	}
}

// changesPolicy reports whether an update can change what the policy part
// computes. A Pod's status changes often (conditions, container states)
// while policy reads only its labels, addresses, phase (finished pods are
// no peers) and ports; a Namespace's only its labels. Policies are read
// whole: any change of their generation, labels or deletion state counts.
func changesPolicy(old, updated any) bool {
	switch n := updated.(type) {
	case *corev1.Pod:
		o, ok := old.(*corev1.Pod)
		return !ok || !maps.Equal(o.Labels, n.Labels) || !slices.Equal(o.Status.PodIPs, n.Status.PodIPs) ||
			o.Status.Phase != n.Status.Phase || o.Spec.NodeName != n.Spec.NodeName
	case *corev1.Namespace:
		o, ok := old.(*corev1.Namespace)
		return !ok || !maps.Equal(o.Labels, n.Labels)
	case client.Object:
		o, ok := old.(client.Object)
		return !ok || specChanged(o, n)
	}
	return true
}
