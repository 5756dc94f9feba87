package daemon

// Node GC. The runtime removes a pod's interface with CNI DEL, and its own
// CNI GC names what it still knows; both need the runtime to run and to
// remember. A pod force-deleted while its node was down, or whose DEL was
// lost with a daemon killed mid-call, leaves an endpoint nobody removes. So
// every GCInterval the daemon asks the API server (live, not its cache)
// about the pod of every endpoint it holds, and removes, exactly as a DEL
// would, an endpoint whose pod is gone (no pod of that name, or one with
// another UID) and has been seen gone for GCGrace. An endpoint younger than
// GCGrace, or one that names no pod, is never collected.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/cniserver/store"
)

// Defaults of the node GC.
const (
	DefaultGCInterval = 5 * time.Minute
	DefaultGCGrace    = 2 * time.Minute
)

var gcCollected = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "estuary_daemon_gc_collected_total",
	Help: "Endpoints removed because their pod no longer exists.",
})

func init() { prometheus.MustRegister(gcCollected) }

// endpointStore is what the GC reads of the state file.
type endpointStore interface {
	List() ([]store.Endpoint, error)
}

// collector removes one endpoint as a CNI DEL does.
type collector interface {
	Collect(ctx context.Context, key store.Key) error
}

// nodeGC collects the endpoints of pods that are gone.
type nodeGC struct {
	eps     endpointStore
	del     collector
	pods    client.Reader // live
	grace   time.Duration
	now     func() time.Time
	missing map[store.Key]time.Time // when each endpoint's pod was first seen gone
}

func newNodeGC(eps endpointStore, del collector, pods client.Reader, grace time.Duration) *nodeGC {
	return &nodeGC{eps: eps, del: del, pods: pods, grace: grace, now: time.Now, missing: map[store.Key]time.Time{}}
}

// run collects every interval until ctx ends.
func (g *nodeGC) run(ctx context.Context, interval time.Duration) error {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if n, err := g.pass(ctx); err != nil {
			log.Error(err, "node gc", "collected", n)
		} else if n > 0 {
			log.Info("node gc collected endpoints of pods that are gone", "endpoints", n)
		}
	}, interval)
	return nil
}

// pass looks at every endpoint once and returns how many it collected.
func (g *nodeGC) pass(ctx context.Context) (int, error) {
	eps, err := g.eps.List()
	if err != nil {
		return 0, fmt.Errorf("list endpoints: %w", err)
	}
	now := g.now()
	seen := make(map[store.Key]bool, len(eps))
	collected := 0
	var errs []error
	for _, ep := range eps {
		seen[ep.Key] = true
		if ep.PodName == "" || now.Sub(ep.Created) < g.grace {
			continue
		}
		gone, err := g.podGone(ctx, ep)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !gone {
			delete(g.missing, ep.Key)
			continue
		}
		first, ok := g.missing[ep.Key]
		if !ok {
			g.missing[ep.Key] = now
			continue
		}
		if now.Sub(first) < g.grace {
			continue
		}
		if err := g.del.Collect(ctx, ep.Key); err != nil {
			errs = append(errs, fmt.Errorf("collect %s (pod %s/%s): %w", ep.Key, ep.PodNamespace, ep.PodName, err))
			continue
		}
		delete(g.missing, ep.Key)
		gcCollected.Inc()
		collected++
	}
	for k := range g.missing {
		if !seen[k] {
			delete(g.missing, k)
		}
	}
	return collected, errors.Join(errs...)
}

// podGone: no pod has the endpoint's name, or one with another UID does.
func (g *nodeGC) podGone(ctx context.Context, ep store.Endpoint) (bool, error) {
	pod := &corev1.Pod{}
	err := g.pods.Get(ctx, client.ObjectKey{Namespace: ep.PodNamespace, Name: ep.PodName}, pod)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("get pod %s/%s of %s: %w", ep.PodNamespace, ep.PodName, ep.Key, err)
	}
	return ep.PodUID != "" && string(pod.UID) != ep.PodUID, nil
}
