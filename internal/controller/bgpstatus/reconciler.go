package bgpstatus

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// Reconciler keeps one Network's BGPPeersEstablished condition in line with
// the nodes' published session states.
type Reconciler struct {
	// Client reads Networks and Nodes from the cache and patches Network
	// status.
	Client client.Client
}

// Setup registers the controller with mgr: it serves Networks (created or
// with a new spec) and maps every Node event that can change the outcome
// (creation, deletion, a change of labels or annotations) to the BGP
// networks.
func Setup(mgr ctrl.Manager) error {
	r := &Reconciler{Client: mgr.GetClient()}
	err := ctrl.NewControllerManagedBy(mgr).Named("bgp-status").
		For(&estuaryv1.Network{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.bgpNetworks),
			builder.WithPredicates(predicate.Or(predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up bgp status controller: %w", err)
	}
	return nil
}

// bgpNetworks: a Node change may change any BGP network's condition.
func (r *Reconciler) bgpNetworks(ctx context.Context, _ client.Object) []reconcile.Request {
	var nets estuaryv1.NetworkList
	if err := r.Client.List(ctx, &nets); err != nil {
		log.FromContext(ctx).Error(err, "list networks to update their bgp status")
		return nil
	}
	var reqs []reconcile.Request
	for i := range nets.Items {
		if nets.Items[i].Spec.Mode == estuaryv1.NetworkModeBGP {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: nets.Items[i].Name}})
		}
	}
	return reqs
}

// Reconcile sets the network's condition when it is in mode BGP (and
// removes it otherwise), with at most one status patch.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	n := &estuaryv1.Network{}
	if err := r.Client.Get(ctx, req.NamespacedName, n); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := n.DeepCopy()
	var changed bool
	if n.Spec.Mode == estuaryv1.NetworkModeBGP {
		var nodes corev1.NodeList
		if err := r.Client.List(ctx, &nodes); err != nil {
			return ctrl.Result{}, fmt.Errorf("network %s: list nodes: %w", n.Name, err)
		}
		changed = meta.SetStatusCondition(&n.Status.Conditions, Condition(n, nodes.Items))
	} else {
		changed = meta.RemoveStatusCondition(&n.Status.Conditions, estuaryv1.ConditionBGPPeersEstablished)
	}
	if !changed {
		return ctrl.Result{}, nil
	}
	// Optimistic locking: the merge patch replaces the whole conditions
	// list, so it must not overwrite a condition written meanwhile.
	patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, n, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("network %s: patch status.conditions[%s]: %w", n.Name, estuaryv1.ConditionBGPPeersEstablished, err)
	}
	c := meta.FindStatusCondition(n.Status.Conditions, estuaryv1.ConditionBGPPeersEstablished)
	if c != nil {
		log.FromContext(ctx).Info("bgp status", "network", n.Name, "status", c.Status, "reason", c.Reason, "message", c.Message)
	}
	return ctrl.Result{}, nil
}
