package netsync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/translate"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
)

// ARP is the underlay's address checks on the segment (ARP for IPv4, NDP
// for IPv6); underlay.Agent implements it.
type ARP interface {
	Probe(ctx context.Context, in underlay.Input, ip netip.Addr, wait time.Duration) (net.HardwareAddr, error)
	CheckGateway(ctx context.Context, in underlay.Input, ip netip.Addr, wait time.Duration) (net.HardwareAddr, error)
	Announce(in underlay.Input, ip netip.Addr) error
}

// How long PodReady listens for an answer to a duplicate address probe and
// to the ARP request or Neighbor Solicitation for the gateway.
const (
	ProbeWait   = 300 * time.Millisecond
	GatewayWait = time.Second
)

// PodReady runs, for each address of ips in a VLAN-mode underlay subnet of
// this node, what must hold before the pod is reported ready: no other
// host answers a duplicate address probe for it (a node still holding the
// pod's previous incarnation would), the subnet's gateway of its family
// answers ARP (IPv4) or a Neighbor Solicitation (IPv6) sent on the pod's
// behalf, and a gratuitous ARP or an unsolicited Neighbor Advertisement
// moves the segment's caches (the gateway's, a switch's) to this node. Overlay and
// BGP addresses need none of it. Without Options.ARP it checks nothing.
func (s *Syncer) PodReady(ctx context.Context, ips []netip.Addr) error {
	if s.opts.ARP == nil {
		return nil
	}
	// Every ADD comes here: read only what tells whether the pod has a
	// VLAN address, and the node only then.
	var nets estuaryv1.NetworkList
	var subs estuaryv1.SubnetList
	shared := client.UnsafeDisableDeepCopy
	if err := errors.Join(s.reader.List(ctx, &nets, shared), s.reader.List(ctx, &subs, shared)); err != nil {
		return fmt.Errorf("underlay checks: read the cache: %w", err)
	}
	objs := translate.Objects{Networks: nets.Items, Subnets: subs.Items}
	if !translate.InVLANSubnet(objs, ips) {
		return nil
	}
	var node corev1.Node
	if err := s.reader.Get(ctx, client.ObjectKey{Name: s.opts.Node}, &node); err != nil {
		return fmt.Errorf("underlay checks: node %s: %w", s.opts.Node, err)
	}
	in, _ := translate.BuildUnderlayInput(&node, "", objs, ips)
	checks := vlanAddresses(in, ips)
	if len(checks) == 0 {
		return nil
	}
	parent := sync.OnceValues(func() (overlay.Parent, error) { return s.dp.ResolveParent(s.opts.Parent) })
	var err error
	if in.Uplink, in.NodeAddrs, err = s.uplink(parent, ips); err != nil {
		return fmt.Errorf("underlay checks: %w", err)
	}
	var errs []error
	for _, c := range checks {
		errs = append(errs, s.readyOne(ctx, in, c))
	}
	return errors.Join(errs...)
}

// vlanCheck is one address to check and the subnet holding it.
type vlanCheck struct {
	ip  netip.Addr
	sub underlay.Subnet
}

// vlanAddresses returns the addresses of ips inside a subnet of a
// VLAN-mode network of in.
func vlanAddresses(in underlay.Input, ips []netip.Addr) []vlanCheck {
	var out []vlanCheck
	for _, ip := range ips {
		ip = ip.Unmap()
		for _, n := range in.Networks {
			if n.IsBGP() {
				continue
			}
			for _, sn := range n.Subnets {
				if sn.CIDR.IsValid() && sn.CIDR.Contains(ip) {
					out = append(out, vlanCheck{ip: ip, sub: sn})
				}
			}
		}
	}
	return out
}

func (s *Syncer) readyOne(ctx context.Context, in underlay.Input, c vlanCheck) error {
	mac, err := s.opts.ARP.Probe(ctx, in, c.ip, ProbeWait)
	if err != nil {
		return err
	}
	if mac != nil {
		return fmt.Errorf("address %s of subnet %s is in use on the segment by %s (duplicate address probe on %s)",
			c.ip, c.sub.Name, mac, in.Uplink)
	}
	if gw := c.sub.Gateway.Unmap(); gw.IsValid() && gw.Is4() == c.ip.Is4() {
		if _, err := s.opts.ARP.CheckGateway(ctx, in, c.ip, GatewayWait); err != nil {
			return err
		}
	}
	return s.opts.ARP.Announce(in, c.ip)
}
