package policystatus

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/estuary-cni/estuary/internal/policytranslate"
)

// Condition type and reasons written on cluster policies, and the reason
// of a NetworkPolicy's Event.
const (
	ConditionAccepted          = "Accepted"
	ReasonAccepted             = "Accepted"
	ReasonNotEnforcedAsWritten = "NotEnforcedAsWritten"
	ReasonPolicyNotEnforced    = "PolicyNotEnforced"
)

// Limits of what the API server takes: an events.k8s.io/v1 note and a
// condition's message.
const (
	maxNote    = 1024
	maxMessage = 32768
)

// EventRecorder records an Event; the manager's events.k8s.io recorder is
// one.
type EventRecorder interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// Setup registers a controller per policy kind the API server serves:
// NetworkPolicy always, ClusterNetworkPolicy at v1beta1, AdminNetworkPolicy
// and BaselineAdminNetworkPolicy at v1alpha1. Each reconciles an object
// when it is created or its spec changes.
func Setup(mgr ctrl.Manager) error {
	gauge, err := newNotEnforced(nil)
	if err != nil {
		return fmt.Errorf("set up policy status: metrics: %w", err)
	}
	np := &NetworkPolicyReconciler{Client: mgr.GetClient(), Events: mgr.GetEventRecorder("estuary-manager"),
		gauge: gauge, emitted: map[types.NamespacedName]string{}}
	err = ctrl.NewControllerManagedBy(mgr).Named("networkpolicy-status").
		For(&networkingv1.NetworkPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(np)
	if err != nil {
		return fmt.Errorf("set up networkpolicy status controller: %w", err)
	}
	for _, k := range statusKinds() {
		ok, err := served(mgr.GetRESTMapper(), k.gvk)
		if err != nil {
			return fmt.Errorf("set up policy status: %w", err)
		}
		if !ok {
			log.Log.WithName("policy-status").Info("kind not served: no status written", "kind", k.gvk.String())
			continue
		}
		r := &StatusReconciler{Client: mgr.GetClient(), kind: k, gauge: gauge}
		err = ctrl.NewControllerManagedBy(mgr).Named(strings.ToLower(k.gvk.Kind)+"-status").
			For(k.newObj(), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
			Complete(r)
		if err != nil {
			return fmt.Errorf("set up %s status controller: %w", k.gvk.Kind, err)
		}
	}
	return nil
}

// served says whether the API server serves gvk.
func served(m meta.RESTMapper, gvk schema.GroupVersionKind) (bool, error) {
	_, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", gvk.Kind, err)
	}
	return true, nil
}

// statusKind is a policy kind with status conditions: how to make one, find
// its problems and reach its conditions.
type statusKind struct {
	gvk        schema.GroupVersionKind
	newObj     func() client.Object
	problems   func(client.Object) []policytranslate.Problem
	conditions func(client.Object) *[]metav1.Condition
}

func statusKinds() []statusKind {
	return []statusKind{
		{
			gvk:    kindIn(npv1beta1.GroupVersion, "ClusterNetworkPolicy"),
			newObj: func() client.Object { return &npv1beta1.ClusterNetworkPolicy{} },
			problems: func(o client.Object) []policytranslate.Problem {
				return policytranslate.ClusterPolicyProblems(o.(*npv1beta1.ClusterNetworkPolicy))
			},
			conditions: func(o client.Object) *[]metav1.Condition {
				return &o.(*npv1beta1.ClusterNetworkPolicy).Status.Conditions
			},
		},
		{
			gvk:    kindIn(npv1alpha1.GroupVersion, "AdminNetworkPolicy"),
			newObj: func() client.Object { return &npv1alpha1.AdminNetworkPolicy{} },
			problems: func(o client.Object) []policytranslate.Problem {
				return policytranslate.AdminNetworkPolicyProblems(o.(*npv1alpha1.AdminNetworkPolicy))
			},
			conditions: func(o client.Object) *[]metav1.Condition {
				return &o.(*npv1alpha1.AdminNetworkPolicy).Status.Conditions
			},
		},
		{
			gvk:    kindIn(npv1alpha1.GroupVersion, "BaselineAdminNetworkPolicy"),
			newObj: func() client.Object { return &npv1alpha1.BaselineAdminNetworkPolicy{} },
			problems: func(o client.Object) []policytranslate.Problem {
				return policytranslate.BaselineAdminNetworkPolicyProblems(o.(*npv1alpha1.BaselineAdminNetworkPolicy))
			},
			conditions: func(o client.Object) *[]metav1.Condition {
				return &o.(*npv1alpha1.BaselineAdminNetworkPolicy).Status.Conditions
			},
		},
	}
}

// StatusReconciler keeps one cluster policy kind's Accepted condition.
type StatusReconciler struct {
	// Client reads the objects from the cache and patches their status.
	Client client.Client
	kind   statusKind
	gauge  *notEnforced
}

// Reconcile sets the object's Accepted condition, with at most one status
// patch.
func (r *StatusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	kind := r.kind.gvk.Kind
	obj := r.kind.newObj()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			r.gauge.record(kind, req.NamespacedName, false)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	orig := obj.DeepCopyObject().(client.Object)
	probs := r.kind.problems(obj)
	r.gauge.record(kind, req.NamespacedName, len(probs) > 0)
	cond := Condition(obj.GetGeneration(), probs)
	if !meta.SetStatusCondition(r.kind.conditions(obj), cond) {
		return ctrl.Result{}, nil
	}
	// Optimistic locking: the merge patch replaces the whole conditions
	// list, so it must not overwrite a condition written meanwhile.
	patch := client.MergeFromWithOptions(orig, client.MergeFromWithOptimisticLock{})
	if err := r.Client.Status().Patch(ctx, obj, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("%s %s: patch status.conditions[%s]: %w", kind, req.Name, ConditionAccepted, err)
	}
	log.FromContext(ctx).Info("policy status", "kind", kind, "name", req.Name, "status", cond.Status, "reason", cond.Reason)
	return ctrl.Result{}, nil
}

// Condition is the Accepted condition of an object of generation gen with
// problems probs.
func Condition(gen int64, probs []policytranslate.Problem) metav1.Condition {
	c := metav1.Condition{Type: ConditionAccepted, ObservedGeneration: gen}
	if len(probs) == 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonAccepted, "every rule is enforced as written"
		return c
	}
	c.Status, c.Reason = metav1.ConditionFalse, ReasonNotEnforcedAsWritten
	c.Message = summary("not enforced as written: ", probs, maxMessage)
	return c
}

// summary is prefix and each problem, "; "-separated, cut to at most limit
// bytes with a count of the problems left out.
func summary(prefix string, probs []policytranslate.Problem, limit int) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i, p := range probs {
		s := p.String()
		if i > 0 {
			s = "; " + s
		}
		var tail int
		if left := len(probs) - i - 1; left > 0 {
			tail = len(fmt.Sprintf("; and %d more", left))
		}
		if b.Len()+len(s)+tail > limit {
			if more := fmt.Sprintf("; and %d more", len(probs)-i); b.Len()+len(more) <= limit {
				b.WriteString(more)
			}
			break
		}
		b.WriteString(s)
	}
	return b.String()
}

// NetworkPolicyReconciler writes a NetworkPolicy's PolicyNotEnforced Event.
type NetworkPolicyReconciler struct {
	// Client reads NetworkPolicies from the cache.
	Client client.Client
	Events EventRecorder
	gauge  *notEnforced
	// emitted is, per NetworkPolicy, what its last Event was written for:
	// its UID, generation and problems.
	mu      sync.Mutex
	emitted map[types.NamespacedName]string
}

// Reconcile writes the NetworkPolicy's Event when it has problems not
// reported yet for its generation.
func (r *NetworkPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	np := &networkingv1.NetworkPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, np); err != nil {
		if apierrors.IsNotFound(err) {
			r.remember(req.NamespacedName, "")
			r.gauge.record("NetworkPolicy", req.NamespacedName, false)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	probs := policytranslate.NetworkPolicyProblems(np)
	r.gauge.record("NetworkPolicy", req.NamespacedName, len(probs) > 0)
	if len(probs) == 0 {
		r.remember(req.NamespacedName, "")
		return ctrl.Result{}, nil
	}
	note := summary("not enforced as written: ", probs, maxNote)
	if !r.remember(req.NamespacedName, fmt.Sprintf("%s/%d/%s", np.UID, np.Generation, note)) {
		return ctrl.Result{}, nil
	}
	r.Events.Eventf(np, nil, corev1.EventTypeWarning, ReasonPolicyNotEnforced, "Enforce", "%s", note)
	log.FromContext(ctx).Info("policy not enforced as written", "networkPolicy", req.String(), "problems", len(probs))
	return ctrl.Result{}, nil
}

// remember records seen ("": nothing) as what key's last Event was for;
// false when it already was.
func (r *NetworkPolicyReconciler) remember(key types.NamespacedName, seen string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.emitted[key] == seen {
		return false
	}
	if seen == "" {
		delete(r.emitted, key)
	} else {
		r.emitted[key] = seen
	}
	return true
}

// kindIn is kind in the group and version gv.
func kindIn(gv metav1.GroupVersion, kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: gv.Group, Version: gv.Version, Kind: kind}
}
