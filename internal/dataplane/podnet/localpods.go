package podnet

// Local-pods table. Add writes a pod's route in table 1000 itself, so the
// pod is reachable the moment Add returns, without waiting for the loop.
// The routes are also the loop's like everything else: LocalPods derives
// table 1000 from the endpoint store and reconciles it as the routing
// plan's owner local-pods (state.OwnerLocalPods), so a route deleted by hand
// comes back and a route left on a veth the store no longer names goes.
//
// In-flight attachments. An Add writes its route before the server records
// the endpoint, and a Del removes the veth (and its routes) before the
// record. The reconcile therefore reads the kernel first and takes the
// store and the server's busy attachments afterwards
// (dataplane.Reconciler.ReconcileLive): the veth of a busy attachment is
// skipped, neither added to nor deleted from, so a route written by an Add
// still in flight is never taken away. An endpoint whose veth does not exist
// is skipped too and reported: a route cannot be added through it, and
// whether the pod is gone is the GC's question, not the table's.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/dataplane"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
	"github.com/estuary-cni/estuary/internal/node/store"
	"github.com/estuary-cni/estuary/pkg/family"
)

// EndpointLister lists the attachments recorded on the node.
type EndpointLister interface {
	List() ([]store.Endpoint, error)
}

// LocalPods reconciles table 1000 from the endpoint store.
type LocalPods struct {
	h    *ops.Handle
	rec  *dataplane.Reconciler
	eps  EndpointLister
	busy func() []store.Key
}

// NewLocalPods returns the local-pods writer of the node's namespace at
// hostNetns (empty: the process's own). busy lists the attachments with a
// request in progress (cniserver.Server.Busy); nil means none.
func NewLocalPods(hostNetns string, eps EndpointLister, busy func() []store.Key) (*LocalPods, error) {
	h, err := ops.Open(hostNetns)
	if err != nil {
		return nil, fmt.Errorf("local pods: %w", err)
	}
	if busy == nil {
		busy = func() []store.Key { return nil }
	}
	return &LocalPods{h: h, rec: dataplane.NewReconciler(h, state.OwnerLocalPods.Ownership()), eps: eps, busy: busy}, nil
}

// Close releases the writer's handle.
func (l *LocalPods) Close() { l.h.Close() }

// Reconcile brings table 1000 and the shared rule to what the endpoint
// store says. It returns the plan it applied and the endpoints skipped
// because their host veth does not exist.
func (l *LocalPods) Reconcile(ctx context.Context) (state.Plan, []store.Key, error) {
	var (
		missing []store.Key
		readErr error
	)
	plan, err := l.rec.ReconcileLive(ctx, func(own state.Ownership, actual state.State) (state.State, state.Ownership) {
		eps, err := l.eps.List()
		if err != nil {
			readErr = fmt.Errorf("local pods: list endpoints: %w", err)
			own.Skip = func(string) bool { return true }
			return state.State{}, own
		}
		busy := busyVeths(l.busy())
		var want state.State
		want, missing, readErr = DesiredLocalPods(eps, busy, func(dev string) bool { _, ok := actual.Links[dev]; return ok })
		own.Skip = func(dev string) bool { return busy[dev] }
		return want, own
	})
	if readErr != nil {
		return plan, missing, readErr
	}
	return plan, missing, err
}

// DesiredLocalPods is table 1000 for eps: one route per address through
// the endpoint's host veth and the shared rule of each family present.
// Endpoints whose veth is busy (named in busy) or does not exist (exists
// says) are left out; the latter are returned. A recorded address that does
// not parse is reported and its endpoint left out.
func DesiredLocalPods(eps []store.Endpoint, busy map[string]bool, exists func(dev string) bool) (state.State, []store.Key, error) {
	var (
		want    state.State
		missing []store.Key
		errs    []error
		fams    = map[family.Family]bool{}
	)
	for _, ep := range eps {
		dev := hostVethOf(ep.Key)
		if busy[dev] {
			continue
		}
		if !exists(dev) {
			missing = append(missing, ep.Key)
			continue
		}
		routes, err := endpointRoutes(ep, dev)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range routes {
			fams[family.Of(r.Dst.Addr())] = true
		}
		want.Routes = append(want.Routes, routes...)
	}
	for _, f := range []family.Family{family.IPv4, family.IPv6} {
		if fams[f] {
			want.Rules = append(want.Rules, localPodsRule(f))
		}
	}
	if len(errs) > 0 {
		return want, missing, fmt.Errorf("local pods: %w", errors.Join(errs...))
	}
	return want, missing, nil
}

// endpointRoutes are ep's routes in table 1000 through dev.
func endpointRoutes(ep store.Endpoint, dev string) ([]state.Route, error) {
	routes := make([]state.Route, 0, len(ep.IPs))
	for _, s := range ep.IPs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("endpoint %s: recorded address %q: %w", ep.Key, s, err)
		}
		routes = append(routes, localRoute(dev, p.Addr()))
	}
	return routes, nil
}

// busyVeths names the host veths of keys.
func busyVeths(keys []store.Key) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[hostVethOf(k)] = true
	}
	return m
}

// hostVethOf is HostVethName of a recorded key.
func hostVethOf(k store.Key) string {
	return HostVethName(cniserver.Attachment{ContainerID: k.ContainerID, IfName: k.IfName})
}
