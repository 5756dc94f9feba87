package datapath

// The overlay. While an Overlay network exists, every pass has package
// translate (pure) turn the snapshot into the overlay package's Input for
// the tunnel the VTEP part published (Snapshot.Tunnel) and applies it;
// without the network, or before the tunnel is published, the overlay is
// left as it is. Underlay subnets with natOutgoing in the node's domains
// (underlay.NATSources of Snapshot.UnderlayInput) are handed to the
// overlay's NAT table (overlay.Input.UnderlayNAT), so they are masqueraded
// only while an Overlay network exists. Every Underlay subnet also goes
// into the overlay input (Underlays), so overlay pods reach underlay pods
// through the tunnel. OverlayConfig.KubeProxyMark, kube-proxy's masquerade
// mark, is left to kube-proxy by the NAT table.
//
// The neighbour table. Every pass also rebuilds, from the snapshot, the
// table of which node's tunnel MAC each pod address lives behind
// (translate.NeighTable, underlay pods included), which Lookup serves. Once
// the overlay is applied, the kernel's neighbour entries on the tunnel that
// point to a pod's former node are refreshed from it, and an answerer
// started once per device answers the kernel's neighbour misses on the
// tunnel from it until the loop ends, restarting after a failure.

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/estuary-cni/estuary/internal/daemon/translate"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// Dataplane is what the loop needs from the node's kernel.
type Dataplane interface {
	ResolveParent(spec overlay.ParentSpec) (overlay.Parent, error)
	Apply(ctx context.Context, in overlay.Input) (desired.Plan, error)
	Answer(ctx context.Context, device string, lookup func(netip.Addr) (desired.MAC, bool)) error
	Refresh(device string, lookup func(netip.Addr) (desired.MAC, bool)) (int, error)
}

// OverlayConfig configures the overlay part.
type OverlayConfig struct {
	// Node is this node's name.
	Node string
	// KubeProxyMark is kube-proxy's masquerade mark (MarkOf of its
	// masqueradeBit): estuary's NAT leaves packets carrying it to
	// kube-proxy. 0 makes no such exception.
	KubeProxyMark uint32
	Log           logr.Logger
}

// OverlayPart applies the overlay and answers neighbour misses on its
// tunnel.
type OverlayPart struct {
	cfg   OverlayConfig
	dp    Dataplane
	neigh atomic.Pointer[map[netip.Addr]desired.MAC]
	// The loop's goroutine only:
	device string // the device the answerer serves
}

var _ Part = (*OverlayPart)(nil)

// NewOverlayPart returns the overlay part applying through dp.
func NewOverlayPart(cfg OverlayConfig, dp Dataplane) *OverlayPart {
	p := &OverlayPart{cfg: cfg, dp: dp}
	empty := map[netip.Addr]desired.MAC{}
	p.neigh.Store(&empty)
	return p
}

// Name implements Part.
func (*OverlayPart) Name() string { return PartOverlay }

// Lookup answers a neighbour miss: the tunnel MAC of the node that owns ip.
// It is safe to call from any goroutine.
func (p *OverlayPart) Lookup(ip netip.Addr) (desired.MAC, bool) {
	m, ok := (*p.neigh.Load())[ip.Unmap()]
	return m, ok
}

// Sync rebuilds the neighbour table, then computes and applies the overlay
// and hands its input on in snap.Overlay (even when applying it failed).
func (p *OverlayPart) Sync(ctx context.Context, snap *Snapshot) error {
	table := translate.NeighTable(p.cfg.Node, snap.Objects)
	p.neigh.Store(&table)
	ovl, ok := netmodel.OverlayNetwork(snap.Objects.Networks)
	if !ok || snap.Tunnel == nil {
		return nil
	}
	cfg := *snap.Tunnel
	in, inputErr := translate.BuildInput(p.cfg.Node, cfg, ovl, snap.Objects, snap.Endpoints)
	if inputErr != nil {
		p.cfg.Log.Error(inputErr, "objects skipped while computing the data path")
	}
	uin, _ := snap.UnderlayInput()
	in.KubeProxyMark, in.UnderlayNAT = p.cfg.KubeProxyMark, underlay.NATSources(uin)
	snap.Overlay = &in
	start := time.Now()
	plan, err := p.dp.Apply(ctx, in)
	if err != nil {
		return fmt.Errorf("apply overlay %s (device %s): %w", ovl.Name, cfg.Device, err)
	}
	if !plan.Empty() {
		p.cfg.Log.Info("data path reconciled", "network", ovl.Name, "device", cfg.Device,
			"changes", plan.Len(), "took", time.Since(start), "pods", len(in.LocalPods), "remotes", len(in.Remotes))
	}
	if n, err := p.dp.Refresh(cfg.Device, p.Lookup); err != nil {
		p.cfg.Log.Error(err, "neighbour entries not refreshed", "device", cfg.Device)
	} else if n > 0 {
		p.cfg.Log.Info("neighbour entries moved to their pods' current nodes", "device", cfg.Device, "entries", n)
	}
	p.answer(ctx, cfg.Device)
	return nil
}

// answer starts the neighbour-miss answerer for device once.
func (p *OverlayPart) answer(ctx context.Context, device string) {
	if p.device == device {
		return
	}
	p.device = device
	go func() {
		for ctx.Err() == nil {
			err := p.dp.Answer(ctx, device, p.Lookup)
			if ctx.Err() != nil {
				return
			}
			p.cfg.Log.Error(err, "neighbour-miss answerer stopped; restarting in 1s", "device", device)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
}
