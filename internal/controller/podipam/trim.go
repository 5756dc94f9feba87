package podipam

import corev1 "k8s.io/api/core/v1"

// TrimPod is a cache transform that keeps of a Pod what the controllers
// read of a cached pod: its metadata without managed fields, its node,
// host network and affinity, its phase and its addresses. The manager
// holds every pod of the cluster, so the rest (containers, volumes,
// tolerations, conditions, container statuses) is most of its memory.
// Nothing here writes a cached Pod back to the API server, so a trimmed
// copy is never sent.
func TrimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta}
	out.ManagedFields = nil
	out.Spec.NodeName, out.Spec.HostNetwork, out.Spec.Affinity = pod.Spec.NodeName, pod.Spec.HostNetwork, pod.Spec.Affinity
	out.Status.Phase, out.Status.PodIP, out.Status.PodIPs = pod.Status.Phase, pod.Status.PodIP, pod.Status.PodIPs
	return out, nil
}
