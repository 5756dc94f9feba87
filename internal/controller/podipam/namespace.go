package podipam

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// ReasonNamespaceUnreadable is the event reason when a pod's Namespace
// could not be read, so its addresses wait: the namespace's annotations
// (network, subnet, family, pool, retention) decide them.
const ReasonNamespaceUnreadable = "NamespaceUnreadable"

// namespaceError is a failure to read a pod's Namespace. The pod is tried
// again with backoff; nothing is allocated from the defaults meanwhile.
type namespaceError struct {
	name string
	err  error
}

func (e *namespaceError) Error() string {
	return fmt.Sprintf("read namespace %s (its annotations decide the pod's addresses; nothing is allocated until it is read): %v", e.name, e.err)
}

func (e *namespaceError) Unwrap() error { return e.err }

// namespaceOf reads pod's Namespace from the cache and, when the cache
// does not show it (a namespace created a moment before its pod, an
// informer not yet synced), live from the API server. Every failure is an
// error, never "no namespace": a pod's addresses would otherwise come from
// the cluster's defaults instead of its namespace's annotations, for good.
// A namespace the API server does not know either is an error too: a pod
// cannot outlive its namespace (a deleted namespace's pods go first, while
// it is Terminating, and a Terminating namespace is still read), so the
// pod read from the cache is already gone, and its next reconcile, which
// finds it absent, releases what it holds.
func (r *Reconciler) namespaceOf(ctx context.Context, pod *corev1.Pod) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	key := client.ObjectKey{Name: pod.Namespace}
	err := r.Client.Get(ctx, key, ns)
	if apierrors.IsNotFound(err) {
		err = r.APIReader.Get(ctx, key, ns)
	}
	switch {
	case err == nil:
		return ns, nil
	case apierrors.IsNotFound(err):
		log.FromContext(ctx).Info("namespace of the pod does not exist: the pod is being deleted, it is tried again",
			"pod", pod.Namespace+"/"+pod.Name, "namespace", pod.Namespace)
	default:
		r.Events.Eventf(pod, nil, corev1.EventTypeWarning, ReasonNamespaceUnreadable, "Allocate",
			"cannot read namespace %s, whose annotations decide the pod's addresses; tried again: %v", pod.Namespace, err)
	}
	return nil, &namespaceError{name: pod.Namespace, err: err}
}
