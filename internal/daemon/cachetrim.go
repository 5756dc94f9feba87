package daemon

import (
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// The daemon's cache holds every Node of the cluster and every IPInstance
// bound to a node (onANode); what it keeps of each is trimmed to what the
// node reads, so that its memory grows as little as it can with the
// cluster. The cached objects are never
// written back (the daemon patches Nodes from fresh objects) and are
// read-only.

// ipInstanceTransform keeps this node's records whole (the address waiter,
// the endpoint recovery and the health of an ADD read them) and, of every
// other node's, what the data path reads (translate.NeighTable and
// changesDataPath): the name, the node label, the address and the phase.
// The node label's map is shared by every record of a node.
func ipInstanceTransform(node string) toolscache.TransformFunc {
	var (
		mu     sync.Mutex
		labels = map[string]map[string]string{}
	)
	nodeLabels := func(n string) map[string]string {
		mu.Lock()
		defer mu.Unlock()
		m, ok := labels[n]
		if !ok {
			m = map[string]string{estuaryv1.LabelNode: n}
			labels[n] = m
		}
		return m
	}
	return func(obj any) (any, error) {
		ipi, ok := obj.(*estuaryv1.IPInstance)
		if !ok {
			return obj, nil
		}
		ipi.ManagedFields = nil
		n, labelled := ipi.Labels[estuaryv1.LabelNode]
		if n == node {
			return ipi, nil
		}
		out := &estuaryv1.IPInstance{TypeMeta: ipi.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: ipi.Name,
			ResourceVersion: ipi.ResourceVersion, DeletionTimestamp: ipi.DeletionTimestamp}}
		if labelled {
			out.Labels = nodeLabels(n)
		}
		out.Spec.Address.IP = ipi.Spec.Address.IP
		out.Status.Phase = ipi.Status.Phase
		return out, nil
	}
}

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
