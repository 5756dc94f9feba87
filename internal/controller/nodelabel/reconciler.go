package nodelabel

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// Reconciler keeps one Node's managed labels equal to Desired.
type Reconciler struct {
	// Client reads Nodes, Networks and Subnets from the cache and patches
	// Nodes.
	Client client.Client
}

// Setup registers the controller with mgr: it serves Nodes whose labels
// change (status heartbeats are not looked at), and maps every Network and
// Subnet event that may change a node's labels to all Nodes.
func Setup(mgr ctrl.Manager) error {
	r := &Reconciler{Client: mgr.GetClient()}
	err := ctrl.NewControllerManagedBy(mgr).Named("node-labels").
		For(&corev1.Node{}, builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Watches(&estuaryv1.Network{}, handler.EnqueueRequestsFromMapFunc(r.allNodes), builder.WithPredicates(inputsChanged)).
		Watches(&estuaryv1.Subnet{}, handler.EnqueueRequestsFromMapFunc(r.allNodes), builder.WithPredicates(inputsChanged)).
		Complete(r)
	if err != nil {
		return fmt.Errorf("set up node label controller: %w", err)
	}
	return nil
}

// allNodes: a Network or Subnet change may change any node's labels.
func (r *Reconciler) allNodes(ctx context.Context, _ client.Object) []reconcile.Request {
	var nodes corev1.NodeList
	// Only the names are read: no copy of every node out of the cache.
	if err := r.Client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		log.FromContext(ctx).Error(err, "list nodes to relabel")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(nodes.Items))
	for i := range nodes.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: nodes.Items[i].Name}})
	}
	return reqs
}

// Reconcile brings one node's managed labels in line with the networks
// attached to it and their availability, with at most one patch.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, req.NamespacedName, node); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var networks estuaryv1.NetworkList
	if err := r.Client.List(ctx, &networks); err != nil {
		return ctrl.Result{}, fmt.Errorf("list networks: %w", err)
	}
	var subnets estuaryv1.SubnetList
	if err := r.Client.List(ctx, &subnets); err != nil {
		return ctrl.Result{}, fmt.Errorf("list subnets: %w", err)
	}
	want := Desired(node.Labels, networks.Items, AvailabilityOf(subnets.Items))
	for k := range want {
		if len(validation.IsQualifiedName(k)) != 0 {
			return ctrl.Result{}, fmt.Errorf("node %s: label key %q is not valid", node.Name, k)
		}
	}
	ch := Changes(node.Labels, want)
	if ch == nil {
		return ctrl.Result{}, nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": ch}})
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("node %s: encode label patch: %w", node.Name, err)
	}
	// A merge patch of the changed keys only: labels other writers set at
	// the same time are kept, and no resourceVersion conflict is possible.
	if err := r.Client.Patch(ctx, node, client.RawPatch(types.MergePatchType, body)); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("node %s: patch labels: %w", node.Name, err)
	}
	log.FromContext(ctx).V(1).Info("labelled node", "node", node.Name, "changes", len(ch))
	return ctrl.Result{}, nil
}
