package netsync

import (
	"fmt"
	"net/netip"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/cniserver/store"
	"github.com/estuary-cni/estuary/internal/dataplane/fastpath"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
)

// FastPath keeps the forwarding fast path (package fastpath) in line with a
// desired state; fastpath.Attacher is one.
type FastPath interface {
	Sync(d fastpath.Desired) error
}

// syncFastPath hands the fast path its devices (the overlay's tunnel, the
// tunnel's parent and the underlay's uplink), the host sides of the
// endpoint store's veths and every subnet of the cluster.
func (s *Syncer) syncFastPath(objs Objects, eps []store.Endpoint, parent func() (overlay.Parent, error)) error {
	if s.opts.FastPath == nil {
		return nil
	}
	d := FastPathDesired(objs, eps, s.opts.HostVeth)
	if ovl, ok := OverlayNetwork(objs.Networks); ok {
		d.Devices = append(d.Devices, overlay.DeviceName(VNI(ovl)))
		if cfg, err := s.tunnel(ovl, parent); err == nil {
			d.Tunnel, d.VTEPs = FastPathTunnel(cfg, s.opts.Node, objs)
		}
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

// FastPathDesired lists the pods' host veths (hostVeth names them) and the
// cluster's subnets with their natOutgoing as the data path applies it
// (default true for an Overlay network's subnets, false for an Underlay
// one's). Subnets that do not parse are left out.
func FastPathDesired(objs Objects, eps []store.Endpoint, hostVeth func(store.Key) string) fastpath.Desired {
	var d fastpath.Desired
	if hostVeth != nil {
		for _, ep := range eps {
			d.Pods = append(d.Pods, hostVeth(ep.Key))
		}
	}
	overlayNets := map[string]bool{}
	for _, n := range objs.Networks {
		overlayNets[n.Name] = n.Spec.Type == estuaryv1.NetworkTypeOverlay
	}
	for _, sn := range objs.Subnets {
		p, err := netip.ParsePrefix(sn.Spec.Range.CIDR)
		if err != nil {
			continue
		}
		nat := overlayNets[sn.Spec.Network]
		if sn.Spec.NATOutgoing != nil {
			nat = *sn.Spec.NATOutgoing
		}
		d.Subnets = append(d.Subnets, fastpath.Subnet{CIDR: p.Masked(), NATOutgoing: nat})
	}
	return d
}

// FastPathTunnel describes the overlay's VXLAN device (cfg) and the other
// nodes' published endpoints for the program's own encapsulation. Nodes
// whose annotations do not parse are left out: the device's FDB has none
// for them either.
func FastPathTunnel(cfg overlay.Config, self string, objs Objects) (*fastpath.TunnelDevice, []fastpath.VTEP) {
	port := cfg.Port
	if port == 0 {
		port = overlay.DefaultPort
	}
	t := &fastpath.TunnelDevice{
		Device: cfg.Device, Parent: cfg.Parent, VNI: cfg.VNI, Port: uint16(port), Local: cfg.LocalIP,
		MAC: cfg.MAC, MTU: cfg.MTU,
	}
	var vteps []fastpath.VTEP
	for _, n := range objs.Nodes {
		if n.Name == self {
			continue
		}
		if r, ok, err := remoteOf(n); err == nil && ok {
			vteps = append(vteps, fastpath.VTEP{MAC: r.MAC, IP: r.VTEP})
		}
	}
	return t, vteps
}
