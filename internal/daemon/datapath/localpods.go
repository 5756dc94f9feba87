package datapath

// The local pods. The routing plan's local-pods writer (node.LocalPods over
// podnet's table) reconciles table 1000 from the endpoint store, which it
// reads itself: the part runs before the pass's read (Options.BeforeRead),
// so a failed read never keeps the pods' host routes from being repaired. The writer skips
// the attachments whose ADD or DEL is in flight; the endpoints it finds
// without a host veth are logged whenever that list changes.

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// LocalPods is the routing plan's local-pods writer (node.LocalPods).
type LocalPods interface {
	Reconcile(ctx context.Context) (desired.Plan, []endpointstore.Key, error)
}

// LocalPodsPart reconciles table 1000 in every pass.
type LocalPodsPart struct {
	pods   LocalPods
	log    logr.Logger
	noVeth string // the endpoints without a host veth, as last logged
}

var _ Part = (*LocalPodsPart)(nil)

// NewLocalPodsPart returns the part that runs pods' Reconcile.
func NewLocalPodsPart(pods LocalPods, log logr.Logger) *LocalPodsPart {
	return &LocalPodsPart{pods: pods, log: log}
}

// Name implements Part.
func (*LocalPodsPart) Name() string { return PartLocalPods }

// Sync reconciles table 1000 from the endpoint store; it needs no snapshot.
func (p *LocalPodsPart) Sync(ctx context.Context, _ *Snapshot) error {
	plan, missing, err := p.pods.Reconcile(ctx)
	if !plan.Empty() {
		p.log.Info("local-pods table reconciled", "changes", plan.Len(), "plan", plan.String())
	}
	if key := fmt.Sprint(missing); key != p.noVeth {
		p.noVeth = key
		if len(missing) > 0 {
			p.log.Info("recorded endpoints without a host veth; their routes wait for it or for the GC", "endpoints", key)
		}
	}
	return err
}
