package daemon

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/cnibackend"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// recoverEndpoints rebuilds the endpoint records when the state file starts
// empty (missing, new, or quarantined as unreadable), before the data-path
// loop or the CNI server acts on them, from the pod interfaces kernel lists
// and this node's IPInstances, read once the cache has synced
// (node.Recovery). A store with records is left as it is.
func recoverEndpoints(ctx context.Context, cfg Config, st *endpointstore.Store, kernel cnibackend.Interfaces, c client.Reader,
	parts *running) error {
	r := &cnibackend.Recovery{Store: st, Kernel: kernel, Records: c, Node: cfg.NodeName, Log: log}
	return r.Run(ctx, parts.synced)
}
