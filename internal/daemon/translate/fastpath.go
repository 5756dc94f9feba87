package translate

import (
	"net/netip"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/fastpath"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// FastPathDesired lists the pods' host veths (hostVeth names them) and the
// cluster's subnets with their natOutgoing as the data path applies it
// (default true for an Overlay network's subnets, false for an Underlay
// one's). Subnets that do not parse are left out. Shaped pods are left out
// too: the bandwidth plugin's tbf qdisc on a host veth shapes what the
// kernel sends through it, which delivery into the pod with
// bpf_redirect_peer would skip, and its ingress qdisc cannot share the
// device with the fast path's clsact.
func FastPathDesired(objs Objects, eps []endpointstore.Endpoint, hostVeth func(endpointstore.Key) string) fastpath.Desired {
	var d fastpath.Desired
	if hostVeth != nil {
		for _, ep := range eps {
			if !ep.Shaped {
				d.Pods = append(d.Pods, hostVeth(ep.Key))
			}
		}
	}
	types := map[string]estuaryv1.NetworkType{}
	for _, n := range objs.Networks {
		types[n.Name] = n.Spec.Type
	}
	for _, sn := range objs.Subnets {
		p, err := netip.ParsePrefix(sn.Spec.Range.CIDR)
		if err != nil {
			continue
		}
		nat := netmodel.NATOutgoing(types[sn.Spec.Network], &sn.Spec)
		d.Subnets = append(d.Subnets, fastpath.Subnet{CIDR: p.Masked(), NATOutgoing: nat})
	}
	return d
}

// FastPathTunnel describes the overlay's VXLAN device and the other nodes'
// endpoints (in.Remotes, the device's FDB) for the program's own
// encapsulation.
func FastPathTunnel(in overlay.Input) (*fastpath.TunnelDevice, []fastpath.VTEP) {
	port := in.Port
	if port == 0 {
		port = overlay.DefaultPort
	}
	t := &fastpath.TunnelDevice{
		Device: in.Device, Parent: in.Parent, VNI: in.VNI, Port: uint16(port), Local: in.LocalIP,
		MAC: in.MAC, MTU: in.MTU,
	}
	var vteps []fastpath.VTEP
	for _, r := range in.Remotes {
		if r.VTEP != in.LocalIP {
			vteps = append(vteps, fastpath.VTEP{MAC: r.MAC, IP: r.VTEP})
		}
	}
	return t, vteps
}
