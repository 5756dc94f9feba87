package podnet

// Local-pods table. Plumb writes a pod's route in table 1000 itself, so the
// pod is reachable the moment its ADD returns, without waiting for the
// loop. The routes are also the loop's like everything else: LocalPods
// derives table 1000 from a list of pods and reconciles it as the routing
// plan's owner local-pods (desired.OwnerLocalPods), so a route deleted by hand
// comes back and a route left on a veth the list no longer names goes.
//
// In-flight attachments. A route is written before its pod is listed (the
// endpoint is recorded after Plumb), and a pair is removed before its pod
// leaves the list. Reconcile therefore reads the kernel first and the list
// afterwards (dataplane.Reconciler.ReconcileLive), and the list names the
// host veths whose attachment has a request in progress: those are skipped,
// neither added to nor deleted from, so a route written by an ADD still in
// flight is never taken away. A pod whose veth does not exist is skipped
// too and reported: a route cannot be added through it, and whether the pod
// is gone is the caller's question, not the table's.

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/estuary-cni/estuary/internal/dataplane"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/pkg/family"
)

// LocalPod is one pod interface's entry in table 1000: its addresses
// through its host veth.
type LocalPod struct {
	HostVeth string
	IPs      []netip.Addr
}

// ListFunc lists the pods table 1000 must route and the host veths of the
// attachments with a request in progress. An error skips every veth.
type ListFunc func() (pods []LocalPod, busy []string, err error)

// LocalPods reconciles table 1000 from a list of pods.
type LocalPods struct {
	h   *ops.Handle
	rec *dataplane.Reconciler
}

// NewLocalPods returns the local-pods writer of the node's namespace at
// hostNetns (empty: the process's own).
func NewLocalPods(hostNetns string) (*LocalPods, error) {
	h, err := ops.Open(hostNetns)
	if err != nil {
		return nil, fmt.Errorf("local pods: %w", err)
	}
	return &LocalPods{h: h, rec: dataplane.NewReconciler(h, desired.OwnerLocalPods.Ownership())}, nil
}

// Close releases the writer's handle.
func (l *LocalPods) Close() { l.h.Close() }

// Reconcile brings table 1000 and the shared rule to what list says; list
// is called once the kernel has been read. It returns the plan it applied
// and the host veths of the pods skipped because their veth does not exist.
func (l *LocalPods) Reconcile(ctx context.Context, list ListFunc) (desired.Plan, []string, error) {
	var (
		missing []string
		listErr error
	)
	plan, err := l.rec.ReconcileLive(ctx, func(own desired.Ownership, actual desired.State) (desired.State, desired.Ownership) {
		pods, busyList, err := list()
		if err != nil {
			listErr = fmt.Errorf("local pods: %w", err)
			own.Skip = func(string) bool { return true }
			return desired.State{}, own
		}
		busy := make(map[string]bool, len(busyList))
		for _, dev := range busyList {
			busy[dev] = true
		}
		var want desired.State
		want, missing = DesiredLocalPods(pods, busy, func(dev string) bool { _, ok := actual.Links[dev]; return ok })
		own.Skip = func(dev string) bool { return busy[dev] }
		return want, own
	})
	if listErr != nil {
		return plan, missing, listErr
	}
	return plan, missing, err
}

// DesiredLocalPods is table 1000 for pods: one route per address through
// the pod's host veth and the shared rule of each family present. Pods
// whose veth is busy (named in busy) or does not exist (exists says) are
// left out; the host veths of the latter are returned.
func DesiredLocalPods(pods []LocalPod, busy map[string]bool, exists func(dev string) bool) (desired.State, []string) {
	var (
		want    desired.State
		missing []string
		fams    = map[family.Family]bool{}
	)
	for _, p := range pods {
		if busy[p.HostVeth] {
			continue
		}
		if !exists(p.HostVeth) {
			missing = append(missing, p.HostVeth)
			continue
		}
		for _, ip := range p.IPs {
			want.Routes = append(want.Routes, localRoute(p.HostVeth, ip))
			fams[family.Of(ip)] = true
		}
	}
	for _, f := range []family.Family{family.IPv4, family.IPv6} {
		if fams[f] {
			want.Rules = append(want.Rules, localPodsRule(f))
		}
	}
	return want, missing
}
