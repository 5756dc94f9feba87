package daemon

// Node GC. The runtime removes a pod's interface with CNI DEL, and its own
// CNI GC names what it still knows; both need the runtime to run and to
// remember. A pod force-deleted while its node was down, or whose DEL was
// lost with a daemon killed mid-call, leaves an endpoint nobody removes. So
// every GCInterval the daemon looks at every endpoint it holds and removes,
// exactly as a DEL would, one whose pod is gone by two accounts that do not
// depend on each other, both seen for GCGrace:
//
//   - its network namespace is gone (the path the runtime gave at ADD no
//     longer holds a namespace): no sandbox uses the interface, and the
//     veth died with the namespace; and
//   - the manager no longer records any of its addresses for its pod: no
//     Bound IPInstance named after one of them binds the endpoint's pod
//     (namespace, name and UID), read live from the API server, not from
//     the cache. The manager keeps a pod's records Bound while the pod
//     exists and has not finished.
//
// The daemon reads no pod for it (it may not: its RBAC grants no pod
// access). A running pod keeps its namespace, so the GC never touches it,
// even when its records were lost; a namespace path the daemon cannot see
// does not remove an endpoint whose pod still holds its addresses. An
// endpoint younger than GCGrace, one that names no pod or no namespace, is
// never collected.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// Defaults of the node GC.
const (
	DefaultGCInterval = 5 * time.Minute
	DefaultGCGrace    = 2 * time.Minute
)

var gcCollected = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "estuary_daemon_gc_collected_total",
	Help: "Endpoints removed because their pod is gone: its network namespace is gone and no record binds its addresses to it.",
})

// endpointStore is what the GC reads of the state file.
type endpointStore interface {
	List() ([]endpointstore.Endpoint, error)
}

// collector removes one endpoint as a CNI DEL does.
type collector interface {
	Collect(ctx context.Context, key endpointstore.Key) error
}

// nodeGC collects the endpoints of pods that are gone.
type nodeGC struct {
	eps       endpointStore
	del       collector
	records   client.Reader // live: IPInstances
	netnsGone func(path string) (bool, error)
	grace     time.Duration
	now       func() time.Time
	missing   map[endpointstore.Key]time.Time // when each endpoint's pod was first seen gone
}

func newNodeGC(eps endpointStore, del collector, records client.Reader, grace time.Duration) *nodeGC {
	return &nodeGC{eps: eps, del: del, records: records, netnsGone: netnsGone, grace: grace, now: time.Now,
		missing: map[endpointstore.Key]time.Time{}}
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
	seen := make(map[endpointstore.Key]bool, len(eps))
	collected := 0
	var errs []error
	for _, ep := range eps {
		seen[ep.Key] = true
		if ep.PodName == "" || ep.Netns == "" || now.Sub(ep.Created) < g.grace {
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

// podGone: the endpoint's network namespace is gone, and none of its
// addresses is recorded for its pod.
func (g *nodeGC) podGone(ctx context.Context, ep endpointstore.Endpoint) (bool, error) {
	gone, err := g.netnsGone(ep.Netns)
	if err != nil || !gone {
		return false, err
	}
	for _, ip := range ep.IPs {
		held, err := g.recordedFor(ctx, ep, ip)
		if err != nil || held {
			return false, err
		}
	}
	return true, nil
}

// recordedFor reports whether the record of address ip (CIDR form) binds it
// to the endpoint's pod: Bound, for the pod's namespace and name, and for
// its UID when both name one.
func (g *nodeGC) recordedFor(ctx context.Context, ep endpointstore.Endpoint, ip string) (bool, error) {
	p, err := netip.ParsePrefix(ip)
	if err != nil {
		return false, fmt.Errorf("endpoint %s: address %q: %w", ep.Key, ip, err)
	}
	name := estuaryv1.InstanceName(p.Addr())
	ipi := &estuaryv1.IPInstance{}
	err = g.records.Get(ctx, client.ObjectKey{Name: name}, ipi)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("get ipinstance %s of %s (pod %s/%s): %w", name, ep.Key, ep.PodNamespace, ep.PodName, err)
	}
	b := ipi.Spec.Binding
	return ipi.Status.Phase == estuaryv1.IPInstanceBound && b.Namespace == ep.PodNamespace && b.PodName == ep.PodName &&
		(b.PodUID == "" || ep.PodUID == "" || b.PodUID == ep.PodUID), nil
}

// netnsGone reports whether path no longer holds a network namespace: it
// does not exist, or it is a file no namespace is mounted on (what a
// runtime that stopped half-way through removing it leaves).
func netnsGone(path string) (bool, error) {
	var fs unix.Statfs_t
	err := unix.Statfs(path, &fs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("netns %s: %w", path, err)
	}
	return fs.Type != unix.NSFS_MAGIC, nil
}
