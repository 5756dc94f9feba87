package netsync

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/estuary-cni/estuary/internal/daemon/translate"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
)

// Underlay is what the loop needs of the node's underlay (VLAN) data path;
// underlay.Agent implements it. Apply with a smaller input removes what is
// no longer wanted.
type Underlay interface {
	Apply(ctx context.Context, in underlay.Input) (state.Plan, error)
}

// syncUnderlay completes and applies the underlay input in (translate.BuildUnderlayInput
// of the node, with inputErr its skipped objects). The uplink is
// Options.Uplink, else the overlay's tunnel parent, resolved only when the
// node has an underlay network.
func (s *Syncer) syncUnderlay(ctx context.Context, node *corev1.Node, in underlay.Input, inputErr error,
	pods []netip.Addr, parent func() (overlay.Parent, error)) error {
	if s.opts.Underlay == nil {
		return nil
	}
	if node == nil {
		return fmt.Errorf("underlay: node %s is not in the cache; underlay state left as it is", s.opts.Node)
	}
	if inputErr != nil {
		s.opts.Log.Error(inputErr, "objects skipped while computing the underlay")
	}
	if len(in.Networks) > 0 {
		uplink, addrs, err := s.uplink(parent, pods)
		if err != nil {
			// Without an uplink every subnet would be left out, which would
			// take the underlay off the node: keep it as it is instead.
			return err
		}
		in.Uplink, in.NodeAddrs = uplink, addrs
	}
	current := in.Cluster
	in.Cluster = translate.WithRetired(current, s.retired)
	if len(in.Networks) == 0 && s.emptyApplied && slices.Equal(in.Cluster, s.retired) {
		// Nothing of the underlay is on the node and nothing changed since
		// an Apply made it so: spare the full read of the kernel's state.
		return nil
	}
	start := time.Now()
	plan, err := s.opts.Underlay.Apply(ctx, in)
	if err != nil {
		s.retired, s.emptyApplied = in.Cluster, false
		return fmt.Errorf("apply underlay on node %s (uplink %q): %w", s.opts.Node, in.Uplink, err)
	}
	s.retired, s.emptyApplied = current, len(in.Networks) == 0
	if !plan.Empty() {
		s.opts.Log.Info("underlay reconciled", "uplink", in.Uplink, "networks", len(in.Networks),
			"changes", plan.Len(), "took", time.Since(start))
	}
	return nil
}

// uplink returns the underlay's uplink and the node's own addresses on it
// with their prefix lengths (when known, and not a pod's address, which an
// enhanced address is): they tell which BGP peers are on the uplink's
// networks and which subnets need no enhanced address.
func (s *Syncer) uplink(parent func() (overlay.Parent, error), pods []netip.Addr) (string, []state.Addr, error) {
	var p overlay.Parent
	var err error
	if s.opts.Uplink == "" {
		if p, err = parent(); err != nil {
			return "", nil, fmt.Errorf("underlay uplink (the tunnel parent): %w", err)
		}
	} else if p, err = s.dp.ResolveParent(overlay.ParentSpec{Name: s.opts.Uplink}); err != nil {
		// An uplink without a global address (a trunk) is still usable.
		return s.opts.Uplink, nil, nil
	}
	var addrs []state.Addr
	for _, pf := range p.Prefixes {
		if ip := pf.Addr().Unmap(); ip.IsValid() && !slices.Contains(pods, ip) {
			addrs = append(addrs, state.Addr{Dev: p.Link, Prefix: netip.PrefixFrom(ip, pf.Bits())})
		}
	}
	if ip := p.IP.Unmap(); len(p.Prefixes) == 0 && ip.IsValid() && !slices.Contains(pods, ip) {
		addrs = append(addrs, state.Addr{Dev: p.Link, Prefix: netip.PrefixFrom(ip, ip.BitLen())})
	}
	return p.Link, addrs, nil
}
