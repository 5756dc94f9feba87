package underlay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// ErrNoAnswer is returned (wrapped) by CheckGateway when the gateway does
// not answer ARP (IPv4) or Neighbor Discovery (IPv6).
var ErrNoAnswer = errors.New("no answer")

// subnetOf returns the vlan-if and subnet of in that contain ip.
func subnetOf(in Input, ip netip.Addr) (string, Subnet, error) {
	ip = ip.Unmap()
	for _, n := range in.Networks {
		for _, s := range n.Subnets {
			if !s.CIDR.IsValid() || !s.CIDR.Contains(ip) {
				continue
			}
			id := vlanOf(n, s)
			if err := validVLAN(id); err != nil {
				return "", Subnet{}, fmt.Errorf("underlay subnet %s: %w", s.Name, err)
			}
			return VLANName(in.uplinkOf(n), id), s, nil
		}
	}
	return "", Subnet{}, fmt.Errorf("%s is in no underlay subnet of this node", ip)
}

// Probe asks the segment of ip's subnet whether another host holds ip
// (duplicate address detection: ARP for IPv4, RFC 5227; a Neighbor
// Solicitation from :: for IPv6, RFC 4862) and returns that host's MAC, or
// nil when none answered within wait. Run it before the pod's address is
// proxied by Apply: the node does not answer its own probe, but another
// node still proxying a pod that moved would, and that is a conflict too.
func (a *Agent) Probe(ctx context.Context, in Input, ip netip.Addr, wait time.Duration) (net.HardwareAddr, error) {
	ip = ip.Unmap()
	dev, _, err := subnetOf(in, ip)
	if err == nil {
		var mac net.HardwareAddr
		if ip.Is4() {
			mac, err = a.h.Segment().ARPProbe(ctx, dev, ip, wait)
		} else {
			mac, err = a.h.Segment().NDPProbe(ctx, dev, ip, wait)
		}
		if err == nil {
			return mac, nil
		}
	}
	return nil, fmt.Errorf("underlay probe %s: %w", ip, err)
}

// CheckGateway resolves the gateway of ip's subnet, by ARP for IPv4 and by
// Neighbor Solicitation for IPv6, asking with ip as sender as the node does
// on the pod's behalf, and fails with ErrNoAnswer when nothing answers
// within wait: a pod whose gateway is unreachable (wrong VLAN, wrong port)
// is better reported than started.
func (a *Agent) CheckGateway(ctx context.Context, in Input, ip netip.Addr, wait time.Duration) (net.HardwareAddr, error) {
	ip = ip.Unmap()
	dev, s, err := subnetOf(in, ip)
	if err != nil {
		return nil, fmt.Errorf("underlay gateway check for %s: %w", ip, err)
	}
	gw := s.Gateway.Unmap()
	if !gw.IsValid() || gw.Is4() != ip.Is4() {
		return nil, fmt.Errorf("underlay gateway check for %s: subnet %s has no gateway of its family", ip, s.Name)
	}
	var mac net.HardwareAddr
	ask := "ARP"
	if ip.Is4() {
		mac, err = a.h.Segment().ARPResolve(ctx, dev, ip, gw, wait)
	} else {
		ask = "neighbor solicitation"
		mac, err = a.h.Segment().NDPResolve(ctx, dev, ip, gw, wait)
	}
	if err == nil && mac == nil {
		err = fmt.Errorf("%w to %s", ErrNoAnswer, ask)
	}
	if err != nil {
		return nil, fmt.Errorf("underlay gateway %s of subnet %s on %s: %w", gw, s.Name, dev, err)
	}
	return mac, nil
}

// Announce tells the segment of ip's subnet, on its vlan-if, that ip is at
// this node (a gratuitous ARP for IPv4, an unsolicited Neighbor
// Advertisement for IPv6), so that the segment's caches (the gateway's, a
// switch's) that still point ip at another node, where the pod ran before,
// move to this node.
func (a *Agent) Announce(in Input, ip netip.Addr) error {
	ip = ip.Unmap()
	dev, _, err := subnetOf(in, ip)
	if err == nil && ip.Is4() {
		err = a.h.Segment().GratuitousARP(dev, ip)
	} else if err == nil {
		err = a.h.Segment().UnsolicitedNA(dev, ip)
	}
	if err != nil {
		return fmt.Errorf("underlay announce %s: %w", ip, err)
	}
	return nil
}
