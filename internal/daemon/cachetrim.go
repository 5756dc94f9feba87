package daemon

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// The daemon's cache holds every Node of the cluster, trimmed to what the
// node reads, so that its memory grows as little as it can with the
// cluster; other nodes' IPInstances live in a cache of their own, as the
// smaller remote.Record. The cached objects are never written back (the
// daemon patches Nodes from fresh objects) and are read-only.

// estuaryAnnotations is the prefix of the Node annotations the daemon
// reads: the tunnel endpoints, the BGP peers' state and the daemon's status.
var estuaryAnnotations = estuaryv1.GroupVersion.Group + "/"

// nodeTransform keeps of a Node what the daemon reads: its name, labels
// (network domains, BGP selectors), estuary's annotations and its
// addresses. Its spec, images, conditions, capacity, volumes and the other
// annotations go.
func nodeTransform(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{TypeMeta: n.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID,
		ResourceVersion: n.ResourceVersion, Generation: n.Generation, Labels: n.Labels,
		DeletionTimestamp: n.DeletionTimestamp}}
	for k, v := range n.Annotations {
		if strings.HasPrefix(k, estuaryAnnotations) {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[k] = v
		}
	}
	out.Status.Addresses = n.Status.Addresses
	return out, nil
}
