package datapath

// The fast path. Each pass hands the forwarding fast path (package
// fastpath) its maps and devices: every subnet of the cluster with its
// natOutgoing, the host sides of the endpoint store's veths
// (FastPathConfig.HostVeth names them), the overlay's tunnel with the VTEPs
// it encapsulates for (from the overlay's input, Snapshot.Overlay, once the
// overlay part computed it), the tunnel's parent and the underlay's uplink.
// A pod plumbed between two passes takes the kernel's path until the next
// one, which its ADD triggers.

import (
	"context"
	"fmt"

	"github.com/estuary-cni/estuary/internal/daemon/translate"
	"github.com/estuary-cni/estuary/internal/dataplane/fastpath"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// FastPath keeps the forwarding fast path (package fastpath) in line with a
// desired state; fastpath.Attacher is one.
type FastPath interface {
	Sync(d fastpath.Desired) error
}

// FastPathConfig configures the fast-path part.
type FastPathConfig struct {
	// HostVeth names the host side of an endpoint's veth.
	HostVeth func(endpointstore.Key) string
	// Uplink is the underlay's NIC, if one is configured.
	Uplink string
	// Uplinks, when set, are the underlay's NICs chosen now, in place of
	// Uplink.
	Uplinks func() []string
}

// FastPathPart syncs the fast path after the overlay and the underlay.
type FastPathPart struct {
	cfg FastPathConfig
	fp  FastPath
}

var _ Part = (*FastPathPart)(nil)

// NewFastPathPart returns the part syncing fp.
func NewFastPathPart(cfg FastPathConfig, fp FastPath) *FastPathPart {
	return &FastPathPart{cfg: cfg, fp: fp}
}

// Name implements Part.
func (*FastPathPart) Name() string { return PartFastPath }

// Sync hands the fast path its devices (the overlay's tunnel, the tunnel's
// parent and the underlay's uplink), the host sides of the endpoint store's
// veths, every subnet of the cluster and, with the overlay's input, the
// tunnel it encapsulates for.
func (p *FastPathPart) Sync(_ context.Context, snap *Snapshot) error {
	d := translate.FastPathDesired(snap.Objects, snap.Endpoints, p.cfg.HostVeth)
	if ovl, ok := netmodel.OverlayNetwork(snap.Objects.Networks); ok {
		d.Devices = append(d.Devices, overlay.DeviceName(netmodel.VNI(&ovl.Spec)))
	}
	if snap.Overlay != nil {
		d.Tunnel, d.VTEPs = translate.FastPathTunnel(*snap.Overlay)
	}
	if parent, err := snap.Parent(); err == nil {
		d.Devices = append(d.Devices, parent.Link)
	}
	if p.cfg.Uplinks != nil {
		d.Devices = append(d.Devices, p.cfg.Uplinks()...)
	} else if p.cfg.Uplink != "" {
		d.Devices = append(d.Devices, p.cfg.Uplink)
	}
	if err := p.fp.Sync(d); err != nil {
		return fmt.Errorf("fast path: %w", err)
	}
	return nil
}
