package netsync

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/translate"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/node/store"
)

// sync is one reconcile: the local-pods table, then read, the overlay
// (compute, publish, apply), the underlay, BGP and the fast path, each
// reported on its own and marked with its part (metrics.go).
func (s *Syncer) sync(ctx context.Context) error {
	localErr := inPart(PartLocalPods, s.syncLocalPods(ctx))
	objs, err := s.read(ctx)
	if err != nil {
		return errors.Join(localErr, inPart(PartRead, err))
	}
	table := translate.NeighTable(s.opts.Node, objs)
	s.neigh.Store(&table)
	eps, err := s.eps.List()
	if err != nil {
		return errors.Join(localErr, inPart(PartRead, fmt.Errorf("list local endpoints: %w", err)))
	}
	pods, _ := translate.LocalPods(eps, nil)
	if !s.started {
		s.startPods, s.started = pods, true
	}
	parent := sync.OnceValues(func() (overlay.Parent, error) { return s.dp.ResolveParent(s.opts.Parent) })
	node := s.self(objs)
	uin, uinErr := underlayOf(node, objs, pods)
	in, ovlErr := s.syncOverlay(ctx, objs, eps, underlay.NATSources(uin), parent)
	return errors.Join(
		localErr,
		inPart(PartOverlay, ovlErr),
		inPart(PartUnderlay, s.syncUnderlay(ctx, node, uin, uinErr, pods, parent)),
		inPart(PartBGP, s.syncBGP(ctx, node, objs, pods)),
		inPart(PartFastPath, s.syncFastPath(objs, eps, in, parent)),
	)
}

// syncLocalPods reconciles table 1000 from the endpoint store. Endpoints
// without a host veth are logged when that list changes.
func (s *Syncer) syncLocalPods(ctx context.Context) error {
	if s.opts.LocalPods == nil {
		return nil
	}
	plan, missing, err := s.opts.LocalPods.Reconcile(ctx)
	if !plan.Empty() {
		s.opts.Log.Info("local-pods table reconciled", "changes", plan.Len(), "plan", plan.String())
	}
	if key := fmt.Sprint(missing); key != s.noVeth {
		s.noVeth = key
		if len(missing) > 0 {
			s.opts.Log.Info("recorded endpoints without a host veth; their routes wait for it or for the GC", "endpoints", key)
		}
	}
	return err
}

// underlayOf is translate.BuildUnderlayInput of node, computed once per pass for the
// underlay and for the overlay's NAT; without the node, an empty input.
func underlayOf(node *corev1.Node, objs translate.Objects, pods []netip.Addr) (underlay.Input, error) {
	if node == nil {
		return underlay.Input{}, nil
	}
	return translate.BuildUnderlayInput(node, "", objs, pods)
}

// self returns this node's Node from objs, nil if it is missing.
func (s *Syncer) self(objs translate.Objects) *corev1.Node {
	for i := range objs.Nodes {
		if objs.Nodes[i].Name == s.opts.Node {
			return &objs.Nodes[i]
		}
	}
	return nil
}

// syncOverlay computes, publishes and applies the overlay; nothing until an
// Overlay network exists. underlayNAT are the natOutgoing underlay subnets
// of the node's domains (underlay.NATSources), masqueraded with the
// overlay's. It returns the overlay's input once computed (even if applying
// it failed), nil before.
func (s *Syncer) syncOverlay(ctx context.Context, objs translate.Objects, eps []store.Endpoint, underlayNAT []netip.Prefix,
	parent func() (overlay.Parent, error)) (*overlay.Input, error) {
	ovl, ok := netmodel.OverlayNetwork(objs.Networks)
	if !ok {
		return nil, nil
	}
	cfg, err := s.tunnel(ovl, parent)
	if err != nil {
		return nil, err
	}
	if err := s.publish(ctx, cfg); err != nil {
		return nil, err
	}
	in, inputErr := translate.BuildInput(s.opts.Node, cfg, ovl, objs, eps)
	if inputErr != nil {
		s.opts.Log.Error(inputErr, "objects skipped while computing the data path")
	}
	in.KubeProxyMark, in.UnderlayNAT = s.opts.KubeProxyMark, underlayNAT
	start := time.Now()
	plan, err := s.dp.Apply(ctx, in)
	if err != nil {
		return &in, fmt.Errorf("apply overlay %s (device %s): %w", ovl.Name, cfg.Device, err)
	}
	if !plan.Empty() {
		s.opts.Log.Info("data path reconciled", "network", ovl.Name, "device", cfg.Device,
			"changes", plan.Len(), "took", time.Since(start), "pods", len(in.LocalPods), "remotes", len(in.Remotes))
	}
	if n, err := s.dp.Refresh(cfg.Device, s.Lookup); err != nil {
		s.opts.Log.Error(err, "neighbour entries not refreshed", "device", cfg.Device)
	} else if n > 0 {
		s.opts.Log.Info("neighbour entries moved to their pods' current nodes", "device", cfg.Device, "entries", n)
	}
	s.answer(ctx, cfg.Device)
	return &in, nil
}

// read lists everything the data path depends on from the cache. The lists
// share the cache's objects instead of copying them (UnsafeDisableDeepCopy):
// everything downstream of sync only reads them, and nothing may write to
// them.
func (s *Syncer) read(ctx context.Context) (translate.Objects, error) {
	var (
		nets  estuaryv1.NetworkList
		subs  estuaryv1.SubnetList
		nodes corev1.NodeList
		ipis  estuaryv1.IPInstanceList
	)
	shared := client.UnsafeDisableDeepCopy
	err := errors.Join(s.reader.List(ctx, &nets, shared), s.reader.List(ctx, &subs, shared),
		s.reader.List(ctx, &nodes, shared), s.reader.List(ctx, &ipis, shared))
	if err != nil {
		return translate.Objects{}, fmt.Errorf("read the cache: %w", err)
	}
	return translate.Objects{Networks: nets.Items, Subnets: subs.Items, Nodes: nodes.Items, IPInstances: ipis.Items}, nil
}

// tunnel computes the VXLAN device's configuration on this node.
func (s *Syncer) tunnel(ovl estuaryv1.Network, parent func() (overlay.Parent, error)) (overlay.Config, error) {
	p, err := parent()
	if err != nil {
		return overlay.Config{}, fmt.Errorf("overlay %s: tunnel parent: %w", ovl.Name, err)
	}
	vni := netmodel.VNI(&ovl.Spec)
	return overlay.Config{
		Device: overlay.DeviceName(vni), VNI: vni, Port: s.opts.Port, Parent: p.Link, LocalIP: p.IP,
		MTU: overlay.MTUFor(p.MTU, p.IP.Is6()), MAC: overlay.StableMAC(s.opts.Node),
	}, nil
}

// publish writes this node's tunnel endpoint on its Node when it differs.
func (s *Syncer) publish(ctx context.Context, cfg overlay.Config) error {
	var node corev1.Node
	if err := s.reader.Get(ctx, client.ObjectKey{Name: s.opts.Node}, &node); err != nil {
		return fmt.Errorf("node %s: %w", s.opts.Node, err)
	}
	ip, mac := cfg.LocalIP.String(), cfg.MAC.String()
	if node.Annotations[estuaryv1.AnnotationVTEPIP] == ip && node.Annotations[estuaryv1.AnnotationVTEPMAC] == mac {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q,%q:%q}}}`,
		estuaryv1.AnnotationVTEPIP, ip, estuaryv1.AnnotationVTEPMAC, mac)
	if err := s.writer.Patch(ctx, &node, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return fmt.Errorf("node %s: publish tunnel endpoint %s %s: %w", s.opts.Node, ip, mac, err)
	}
	s.opts.Log.Info("published tunnel endpoint", "node", s.opts.Node, "ip", ip, "mac", mac)
	return nil
}

// answer starts the neighbour-miss answerer for device once.
func (s *Syncer) answer(ctx context.Context, device string) {
	if s.device == device {
		return
	}
	s.device = device
	go func() {
		for ctx.Err() == nil {
			err := s.dp.Answer(ctx, device, s.Lookup)
			if ctx.Err() != nil {
				return
			}
			s.opts.Log.Error(err, "neighbour-miss answerer stopped; restarting in 1s", "device", device)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
		}
	}()
}
