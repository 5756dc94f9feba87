package manager

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/controller/podipam"
)

// cacheOptions trims what the manager's informers keep. The manager holds
// every Pod, Node and IPInstance of the cluster, so at 50,000 pods the
// cache is most of its memory: managed fields go from every object, a Pod
// keeps only what is read of a cached pod (podipam.TrimPod), and a Node
// loses its images and volumes. The manager never writes back a Pod or a
// Node it read from the cache (Node labels are patched from a computed
// body), so a trimmed copy never reaches the API server.
func cacheOptions() cache.Options {
	return cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Transform: podipam.TrimPod},
			&corev1.Node{}: {Transform: trimNode},
		},
	}
}

// trimNode drops of a cached Node what the manager never reads and what
// makes a real node's object large: its managed fields, the images it
// holds and the volumes attached to it.
func trimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	node.ManagedFields = nil
	node.Status.Images, node.Status.VolumesInUse, node.Status.VolumesAttached = nil, nil, nil
	return node, nil
}
