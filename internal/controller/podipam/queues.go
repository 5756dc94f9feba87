package podipam

import (
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/estuary-cni/estuary/internal/workload"
)

// queues feed work to the two controllers from outside an event: a pod
// name to look at again (a pod waiting for an address, a holder whose
// record names it) to the pod controller, a workload's pool to the pool
// controller. A full queue drops the request: the audit comes by anyway.
type queues struct {
	pods  chan event.TypedGenericEvent[types.NamespacedName]
	pools chan event.TypedGenericEvent[workload.Ref]

	mu sync.Mutex
	// waiting lists, per record name, the pods waiting for its address.
	waiting map[string][]types.NamespacedName
}

func newQueues() *queues {
	return &queues{
		pods:    make(chan event.TypedGenericEvent[types.NamespacedName], 1024),
		pools:   make(chan event.TypedGenericEvent[workload.Ref], 1024),
		waiting: map[string][]types.NamespacedName{},
	}
}

// kickPod queues a pod name for the pod controller.
func (q *queues) kickPod(pod types.NamespacedName) {
	select {
	case q.pods <- event.TypedGenericEvent[types.NamespacedName]{Object: pod}:
	default:
	}
}

// kickPool queues a workload's pool for the pool controller.
func (q *queues) kickPool(pool workload.Ref) {
	select {
	case q.pools <- event.TypedGenericEvent[workload.Ref]{Object: poolRequest(pool)}:
	default:
	}
}

// kick queues key's holder: its pool or its pod name.
func (q *queues) kick(key string) {
	if pool, ok := poolOf(key); ok {
		q.kickPool(pool)
	} else if pod, ok := podOf(key); ok {
		q.kickPod(pod)
	}
}

// waitFor notes that pod waits for the address of record name.
func (q *queues) waitFor(name string, pod types.NamespacedName) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !slices.Contains(q.waiting[name], pod) {
		q.waiting[name] = append(q.waiting[name], pod)
	}
}

// wake queues the pods waiting for the address of record name.
func (q *queues) wake(name string) {
	q.mu.Lock()
	pods := q.waiting[name]
	delete(q.waiting, name)
	q.mu.Unlock()
	for _, p := range pods {
		q.kickPod(p)
	}
}
