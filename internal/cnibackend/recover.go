package cnibackend

// Recovery. The state file is a cache of the pod interfaces the node built,
// not their only record: podnet finds them in the kernel (each host veth's
// alias names its attachment, and the local-pods table routes each pod
// address to its veth). A daemon whose state file is missing or was
// quarantined as unreadable rebuilds its endpoints from these and from the
// node's Bound IPInstances (which name the pods) before its data-path loop
// runs, so no running pod's routes, proxy neighbours or announcements are
// withdrawn because a local file was lost.

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// RecoveryStore is the endpoint store as recovery sees it.
type RecoveryStore interface {
	// Fresh says the store started empty (no file, a new one, or one
	// quarantined as unreadable).
	Fresh() bool
	// Quarantined is where an unreadable file was moved; empty if none.
	Quarantined() string
	Put(ep endpointstore.Endpoint) error
}

// Interfaces lists the pod interfaces in the kernel;
// podnet.Plumber implements it.
type Interfaces interface {
	Interfaces() (ifs []podnet.Plumbed, unnamed []string, err error)
}

// Recovery rebuilds the endpoint records when the store starts fresh.
type Recovery struct {
	Store  RecoveryStore
	Kernel Interfaces
	// Records reads this node's IPInstances (label
	// networking.estuary.io/node=Node).
	Records client.Reader
	Node    string
	Log     logr.Logger
}

// Run rebuilds the endpoint records when the store starts fresh, before the
// data-path loop or the CNI server acts on them: the pod interfaces in the
// kernel joined with this node's Bound IPInstances, read once synced is
// closed (the cache behind Records has synced). A store with records is
// left as it is.
func (r *Recovery) Run(ctx context.Context, synced <-chan struct{}) error {
	if !r.Store.Fresh() {
		return nil
	}
	if q := r.Store.Quarantined(); q != "" {
		r.Log.Info("state file was unreadable; moved aside, rebuilding endpoints from the kernel", "moved to", q)
	}
	select {
	case <-synced:
	case <-ctx.Done():
		return ctx.Err()
	}
	recorded, err := r.recorded(ctx)
	if err != nil {
		return err
	}
	eps, unnamed, err := recoverFrom(r.Kernel, recorded, time.Now().UTC())
	if err != nil {
		return err
	}
	for _, ep := range eps {
		if err := r.Store.Put(ep); err != nil {
			return fmt.Errorf("recover endpoints: %w", err)
		}
	}
	r.Log.Info("endpoints rebuilt from the kernel", "endpoints", len(eps), "hostVethsWithoutAlias", unnamed)
	return nil
}

// recordedPod is the pod the node's records bind an address to.
type recordedPod struct {
	Namespace, Pod, PodUID string
}

// recorded maps the addresses of this node's Bound IPInstances to their
// pods.
func (r *Recovery) recorded(ctx context.Context) (map[netip.Addr]recordedPod, error) {
	var list estuaryv1.IPInstanceList
	if err := r.Records.List(ctx, &list, client.MatchingLabels{estuaryv1.LabelNode: r.Node}); err != nil {
		return nil, fmt.Errorf("recover endpoints: list this node's ipinstances: %w", err)
	}
	out := make(map[netip.Addr]recordedPod, len(list.Items))
	for _, ipi := range list.Items {
		p, err := netip.ParsePrefix(ipi.Spec.Address.IP)
		if err != nil || ipi.Status.Phase != estuaryv1.IPInstanceBound {
			continue
		}
		b := ipi.Spec.Binding
		out[p.Addr()] = recordedPod{Namespace: b.Namespace, Pod: b.PodName, PodUID: b.PodUID}
	}
	return out, nil
}

// recoverFrom lists, as endpoint records created now, the pod interfaces
// kernel holds, their pods named by recorded. unnamed lists host veths
// without an alias that names their attachment; they are left as they are.
func recoverFrom(kernel Interfaces, recorded map[netip.Addr]recordedPod, now time.Time) (eps []endpointstore.Endpoint,
	unnamed []string, err error) {
	ifs, unnamed, err := kernel.Interfaces()
	if err != nil {
		return nil, nil, fmt.Errorf("recover endpoints: %w", err)
	}
	for _, i := range ifs {
		ep := endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: i.ContainerID, IfName: i.IfName}, Netns: i.Netns,
			Created: now, Recovered: true}
		for _, ip := range i.IPs {
			if r, ok := recorded[ip.Addr()]; ok {
				ep.PodNamespace, ep.PodName, ep.PodUID = r.Namespace, r.Pod, r.PodUID
			}
			// As the server records a reply's addresses: host prefixes.
			ep.IPs = append(ep.IPs, ip.String())
		}
		eps = append(eps, ep)
	}
	return eps, unnamed, nil
}
