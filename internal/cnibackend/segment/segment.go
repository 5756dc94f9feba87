// Package segment checks and announces a pod's addresses on the VLAN
// segments its node is attached to before the pod starts: the last step of
// a CNI ADD for underlay pods (node.Readiness). It reads no API object:
// the addresses come resolved by the daemon's waiter (ipwait.Address's
// Segment), and the underlay agent sends the frames.
package segment

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/estuary-cni/estuary/internal/cnibackend/ipwait"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
)

// ARP is the underlay's address checks on a segment (ARP for IPv4, NDP for
// IPv6); underlay.Agent implements it.
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

// Checks is the node.Readiness of pods with addresses on VLAN segments.
// For each address with a Segment it makes sure, before the pod is
// reported ready, that no other host answers a duplicate address probe for
// it (a node still holding the pod's previous incarnation would), that the
// subnet's gateway of its family answers ARP (IPv4) or a Neighbor
// Solicitation (IPv6) sent on the pod's behalf, and it sends a gratuitous
// ARP or an unsolicited Neighbor Advertisement that moves the segment's
// caches (the gateway's, a switch's) to this node. Overlay and BGP
// addresses need none of it. It reads no API object: the addresses come
// resolved.
type Checks struct {
	// ARP runs the checks on the segment.
	ARP ARP
	// Uplink names the underlay's NIC (the vlan-ifs' parent); it is called
	// only for a pod with a Segment.
	Uplink func() (string, error)
}

// PodReady runs the checks of every address of addrs on a segment.
func (c *Checks) PodReady(ctx context.Context, addrs []ipwait.Address) error {
	var onSegment []ipwait.Address
	for _, a := range addrs {
		if a.Segment != nil {
			onSegment = append(onSegment, a)
		}
	}
	if len(onSegment) == 0 {
		return nil
	}
	uplink, err := c.Uplink()
	if err != nil {
		return fmt.Errorf("underlay checks: %w", err)
	}
	var errs []error
	for _, a := range onSegment {
		errs = append(errs, c.readyOne(ctx, segmentInput(uplink, a), a))
	}
	return errors.Join(errs...)
}

// segmentInput is the underlay input that names a's segment: its subnet
// on a VLAN network of a's VLAN id over uplink.
func segmentInput(uplink string, a ipwait.Address) underlay.Input {
	sn := underlay.Subnet{Name: a.Subnet, CIDR: a.IP.Masked(), Gateway: a.Gateway}
	return underlay.Input{Uplink: uplink, Networks: []underlay.Network{
		{Name: a.Network, Mode: underlay.ModeVLAN, VLAN: a.Segment.VLAN, Subnets: []underlay.Subnet{sn}},
	}}
}

func (c *Checks) readyOne(ctx context.Context, in underlay.Input, a ipwait.Address) error {
	ip := a.IP.Addr().Unmap()
	mac, err := c.ARP.Probe(ctx, in, ip, ProbeWait)
	if err != nil {
		return err
	}
	if mac != nil {
		return fmt.Errorf("address %s of subnet %s is in use on the segment by %s (duplicate address probe on %s)",
			ip, a.Subnet, mac, in.Uplink)
	}
	if gw := a.Gateway.Unmap(); gw.IsValid() && gw.Is4() == ip.Is4() {
		if _, err := c.ARP.CheckGateway(ctx, in, ip, GatewayWait); err != nil {
			return err
		}
	}
	return c.ARP.Announce(in, ip)
}
