package datapath

// The underlay. The input (Snapshot.UnderlayInput) holds the Underlay
// networks (VLAN and BGP mode, a BGP network with its peer addresses) whose
// domain holds this node (netmodel.Attached over the node's labels in the
// cache, as the manager labels nodes), their subnets, and in each subnet
// the addresses of the endpoint store that lie in its CIDR; it also lists
// every Underlay subnet of the cluster, which fixes table numbers and what
// the agent owns. A node relabelled out of a domain, or a deleted network,
// gives a smaller input, and Apply removes what is no longer in it. Because
// the agent owns proxy neighbours and enhanced addresses only inside
// subnets its input names, a subnet that disappears stays in Input.Cluster
// until an Apply without its network has succeeded. An input without
// networks that was applied is not applied again until it changes, which
// spares nodes outside every domain a full read of the kernel's state per
// pass. The uplink is UnderlayConfig.Uplink, else the tunnel's parent link;
// when it cannot be resolved, or this node's Node is not in the cache, the
// underlay is left as it is rather than removed. The uplink's addresses go
// in with their prefix lengths: they tell which BGP peer is on the uplink's
// network.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/go-logr/logr"

	"github.com/estuary-cni/estuary/internal/daemon/translate"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/internal/uplink"
)

// Underlay is what the loop needs of the node's underlay (VLAN) data path;
// underlay.Agent implements it. Apply with a smaller input removes what is
// no longer wanted.
type Underlay interface {
	Apply(ctx context.Context, in underlay.Input) (desired.Plan, error)
}

// ParentResolver finds a link and its addresses; overlay.Agent is one.
type ParentResolver interface {
	ResolveParent(spec overlay.ParentSpec) (overlay.Parent, error)
}

// UnderlayConfig configures the underlay part.
type UnderlayConfig struct {
	// Node is this node's name.
	Node string
	// Uplink is the underlay's NIC; empty means the tunnel's parent link.
	Uplink string
	// Links resolves Uplink.
	Links ParentResolver
	// Choose, when set, chooses each pass the uplink of the VLAN networks
	// (uplink.VLAN) and of the BGP networks (uplink.BGP) instead of
	// Uplink: "" means the tunnel's parent link; an error leaves that
	// mode's networks off the node and fails the pass with it.
	Choose func(m uplink.Mode) (string, error)
	Log    logr.Logger
}

// UnderlayPart applies the underlay networks of the node's domains.
type UnderlayPart struct {
	cfg UnderlayConfig
	ua  Underlay
	// The loop's goroutine only:
	retired      []underlay.SubnetRef // the underlay subnets of the last Apply
	missing      []error              // the modes Choose found no uplink for, this pass
	emptyApplied bool                 // the last Apply had no network and succeeded
}

var _ Part = (*UnderlayPart)(nil)

// NewUnderlayPart returns the underlay part applying through ua.
func NewUnderlayPart(cfg UnderlayConfig, ua Underlay) *UnderlayPart {
	return &UnderlayPart{cfg: cfg, ua: ua}
}

// Name implements Part.
func (*UnderlayPart) Name() string { return PartUnderlay }

// Sync completes and applies the snapshot's underlay input. The uplink is
// resolved only when the node has an underlay network.
func (p *UnderlayPart) Sync(ctx context.Context, snap *Snapshot) error {
	if snap.Self == nil {
		return fmt.Errorf("underlay: node %s is not in the cache; underlay state left as it is", p.cfg.Node)
	}
	in, inputErr := snap.UnderlayInput()
	if inputErr != nil {
		p.cfg.Log.Error(inputErr, "objects skipped while computing the underlay")
	}
	var chooseErr error
	if p.cfg.Choose != nil {
		var err error
		if in, err = p.chooseUplinks(snap, in); err != nil {
			return err
		}
		chooseErr = errors.Join(p.missing...)
	} else if len(in.Networks) > 0 {
		uplink, addrs, err := p.uplink(snap, p.cfg.Uplink)
		if err != nil {
			// Without an uplink every subnet would be left out, which would
			// take the underlay off the node: keep it as it is instead.
			return err
		}
		in.Uplink, in.NodeAddrs = uplink, addrs
	}
	current := in.Cluster
	in.Cluster = translate.WithRetired(current, p.retired)
	if len(in.Networks) == 0 && p.emptyApplied && slices.Equal(in.Cluster, p.retired) {
		// Nothing of the underlay is on the node and nothing changed since
		// an Apply made it so: spare the full read of the kernel's state.
		return chooseErr
	}
	start := time.Now()
	plan, err := p.ua.Apply(ctx, in)
	if err != nil {
		p.retired, p.emptyApplied = in.Cluster, false
		return fmt.Errorf("apply underlay on node %s (uplink %q): %w", p.cfg.Node, in.Uplink, err)
	}
	p.retired, p.emptyApplied = current, len(in.Networks) == 0
	if !plan.Empty() {
		p.cfg.Log.Info("underlay reconciled", "uplink", in.Uplink, "bgpUplink", in.BGPUplink, "networks", len(in.Networks),
			"changes", plan.Len(), "took", time.Since(start))
	}
	return chooseErr
}

// uplink returns the underlay's uplink and the node's own addresses on it
// with their prefix lengths (when known, and not a pod's address, which an
// enhanced address is): they tell which BGP peers are on the uplink's
// networks and which subnets need no enhanced address.
func (p *UnderlayPart) uplink(snap *Snapshot, name string) (string, []desired.Addr, error) {
	var parent overlay.Parent
	var err error
	if name == "" {
		if parent, err = snap.Parent(); err != nil {
			return "", nil, fmt.Errorf("underlay uplink (the tunnel parent): %w", err)
		}
	} else if parent, err = p.cfg.Links.ResolveParent(overlay.ParentSpec{Name: name}); err != nil {
		// An uplink without a global address (a trunk) is still usable.
		return name, nil, nil
	}
	var addrs []desired.Addr
	for _, pf := range parent.Prefixes {
		if ip := pf.Addr().Unmap(); ip.IsValid() && !slices.Contains(snap.Pods, ip) {
			addrs = append(addrs, desired.Addr{Dev: parent.Link, Prefix: netip.PrefixFrom(ip, pf.Bits())})
		}
	}
	if ip := parent.IP.Unmap(); len(parent.Prefixes) == 0 && ip.IsValid() && !slices.Contains(snap.Pods, ip) {
		addrs = append(addrs, desired.Addr{Dev: parent.Link, Prefix: netip.PrefixFrom(ip, ip.BitLen())})
	}
	return parent.Link, addrs, nil
}

// chooseUplinks sets in's uplinks by Choose for the modes among its
// networks; the networks of a mode without an uplink are taken out of in
// (so not programmed) and the reason kept in p.missing. An unresolvable
// tunnel parent, when it is a mode's uplink, keeps the underlay as it is.
func (p *UnderlayPart) chooseUplinks(snap *Snapshot, in underlay.Input) (underlay.Input, error) {
	p.missing = nil
	nets := in.Networks
	in.Networks = nil
	for _, m := range []uplink.Mode{uplink.VLAN, uplink.BGP} {
		var ns []underlay.Network
		for _, n := range nets {
			if n.IsBGP() == (m == uplink.BGP) {
				ns = append(ns, n)
			}
		}
		if len(ns) == 0 {
			continue
		}
		name, err := p.cfg.Choose(m)
		if err != nil {
			p.missing = append(p.missing, fmt.Errorf("underlay on node %s: %w", p.cfg.Node, err))
			continue
		}
		link, addrs, err := p.uplink(snap, name)
		if err != nil {
			return in, err
		}
		if m == uplink.VLAN {
			in.Uplink = link
		} else {
			in.BGPUplink = link
		}
		in.Networks = append(in.Networks, ns...)
		if m == uplink.VLAN || link != in.Uplink {
			in.NodeAddrs = append(in.NodeAddrs, addrs...)
		}
	}
	if in.Uplink == "" {
		in.Uplink = in.BGPUplink
	}
	return in, nil
}
