package podipam

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// ReasonNotSelected is the event reason on a pod the manager's
// --pod-label-selector does not select: estuary gives it no address. The
// node daemon names this event in the error of a CNI ADD that waited for
// the pod's addresses in vain.
const ReasonNotSelected = "NotSelected"

// notServed reports whether pod is outside the manager's pod selector and
// must get nothing: no new address and no address kept for its name (a
// StatefulSet's). What it already holds under its own UID, given before the
// selector changed, stays its own until it goes, and is settled as any
// pod's. It records ReasonNotSelected on the pod (the recorder folds
// repeats into one event series).
func (r *Reconciler) notServed(ctx context.Context, pod *corev1.Pod, held []holding) bool {
	if r.PodSelector == nil || r.PodSelector.Matches(labels.Set(pod.Labels)) {
		return false
	}
	if len(held) > 0 && held[0].podUID == string(pod.UID) {
		return false
	}
	log.FromContext(ctx).V(1).Info("pod not selected by --pod-label-selector", "pod", pod.Namespace+"/"+pod.Name)
	r.Events.Eventf(pod, nil, corev1.EventTypeNormal, ReasonNotSelected, "Allocate",
		"estuary gives pod %s/%s no address: its labels do not match the manager's --pod-label-selector %q",
		pod.Namespace, pod.Name, r.PodSelector.String())
	return true
}
