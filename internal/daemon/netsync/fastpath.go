package netsync

import (
	"fmt"

	"github.com/estuary-cni/estuary/internal/daemon/translate"
	"github.com/estuary-cni/estuary/internal/dataplane/fastpath"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/node/store"
)

// FastPath keeps the forwarding fast path (package fastpath) in line with a
// desired state; fastpath.Attacher is one.
type FastPath interface {
	Sync(d fastpath.Desired) error
}

// syncFastPath hands the fast path its devices (the overlay's tunnel, the
// tunnel's parent and the underlay's uplink), the host sides of the
// endpoint store's veths, every subnet of the cluster and, with the
// overlay's input (nil before it is computed), the tunnel it encapsulates
// for.
func (s *Syncer) syncFastPath(objs translate.Objects, eps []store.Endpoint, in *overlay.Input,
	parent func() (overlay.Parent, error)) error {
	if s.opts.FastPath == nil {
		return nil
	}
	d := translate.FastPathDesired(objs, eps, s.opts.HostVeth)
	if ovl, ok := netmodel.OverlayNetwork(objs.Networks); ok {
		d.Devices = append(d.Devices, overlay.DeviceName(netmodel.VNI(&ovl.Spec)))
	}
	if in != nil {
		d.Tunnel, d.VTEPs = translate.FastPathTunnel(*in)
	}
	if p, err := parent(); err == nil {
		d.Devices = append(d.Devices, p.Link)
	}
	if s.opts.Uplink != "" {
		d.Devices = append(d.Devices, s.opts.Uplink)
	}
	if err := s.opts.FastPath.Sync(d); err != nil {
		return fmt.Errorf("fast path: %w", err)
	}
	return nil
}
