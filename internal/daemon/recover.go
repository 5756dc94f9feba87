package daemon

import (
	"context"
	"fmt"
	"net/netip"

	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/node/store"
)

// endpointRecoverer rebuilds endpoint records from the kernel.
type endpointRecoverer interface {
	Recover(recorded []podnet.Recorded) ([]store.Endpoint, []string, error)
}

// recoverEndpoints rebuilds the endpoint records when the state file starts
// empty (missing, new, or quarantined as unreadable), before the data-path
// loop or the CNI server acts on them: the pod interfaces in the kernel,
// named by their host veths' aliases, joined with this node's Bound
// IPInstances (read once the cache has synced). A store with records is
// left as it is.
func recoverEndpoints(ctx context.Context, cfg Config, st *store.Store, r endpointRecoverer, c client.Reader, parts *running) error {
	if !st.Fresh() {
		return nil
	}
	if q := st.Quarantined(); q != "" {
		log.Info("state file was unreadable; moved aside, rebuilding endpoints from the kernel", "moved to", q)
	}
	select {
	case <-parts.synced:
	case <-ctx.Done():
		return ctx.Err()
	}
	var list estuaryv1.IPInstanceList
	if err := c.List(ctx, &list, client.MatchingLabels{estuaryv1.LabelNode: cfg.NodeName}); err != nil {
		return fmt.Errorf("recover endpoints: list this node's ipinstances: %w", err)
	}
	var recorded []podnet.Recorded
	for _, ipi := range list.Items {
		p, err := netip.ParsePrefix(ipi.Spec.Address.IP)
		if err != nil || ipi.Status.Phase != estuaryv1.IPInstanceBound {
			continue
		}
		b := ipi.Spec.Binding
		recorded = append(recorded, podnet.Recorded{IP: p, Namespace: b.Namespace, Pod: b.PodName, PodUID: b.PodUID})
	}
	eps, unnamed, err := r.Recover(recorded)
	if err != nil {
		return err
	}
	for _, ep := range eps {
		if err := st.Put(ep); err != nil {
			return fmt.Errorf("recover endpoints: %w", err)
		}
	}
	log.Info("endpoints rebuilt from the kernel", "endpoints", len(eps), "hostVethsWithoutAlias", unnamed)
	return nil
}
