package datapath

// VTEP publication. Other nodes reach this node's overlay pods through its
// tunnel endpoint, which they read from the annotations
// estuaryv1.AnnotationVTEPIP and AnnotationVTEPMAC of its Node. While an
// Overlay network exists, every pass computes this node's VXLAN device (the
// VNI of the network, the tunnel's parent link and address, the MTU that
// leaves room for the encapsulation, a MAC derived from the node's name)
// and patches the annotations when the Node, as the snapshot has it,
// carries others. Only this node's daemon writes them, so the merge patch
// never conflicts with another writer. The overlay part applies only a
// published tunnel (Snapshot.Tunnel), so a tunnel that cannot be computed
// or published leaves the overlay as it is until a later pass; the part's
// failures count as the overlay's in the metrics.

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// VTEPConfig configures the VTEP part.
type VTEPConfig struct {
	// Node is this node's name; Port the VXLAN UDP port.
	Node string
	Port int
	// Writer patches this node's Node.
	Writer client.Writer
	Log    logr.Logger
}

// VTEPPart publishes this node's tunnel endpoint on its Node.
type VTEPPart struct {
	cfg VTEPConfig
}

var _ Part = (*VTEPPart)(nil)

// NewVTEPPart returns the VTEP part.
func NewVTEPPart(cfg VTEPConfig) *VTEPPart { return &VTEPPart{cfg: cfg} }

// Name implements Part: the overlay's, which waits for it.
func (*VTEPPart) Name() string { return PartOverlay }

// Sync computes and publishes the tunnel and hands it on in snap.Tunnel;
// nothing until an Overlay network exists.
func (p *VTEPPart) Sync(ctx context.Context, snap *Snapshot) error {
	ovl, ok := netmodel.OverlayNetwork(snap.Objects.Networks)
	if !ok {
		return nil
	}
	cfg, err := p.tunnel(ovl, snap)
	if err != nil {
		return err
	}
	if err := p.publish(ctx, snap.Self, cfg); err != nil {
		return err
	}
	snap.Tunnel = &cfg
	return nil
}

// tunnel computes the VXLAN device's configuration on this node.
func (p *VTEPPart) tunnel(ovl estuaryv1.Network, snap *Snapshot) (overlay.Config, error) {
	parent, err := snap.Parent()
	if err != nil {
		return overlay.Config{}, fmt.Errorf("overlay %s: tunnel parent: %w", ovl.Name, err)
	}
	vni := netmodel.VNI(&ovl.Spec)
	return overlay.Config{
		Device: overlay.DeviceName(vni), VNI: vni, Port: p.cfg.Port, Parent: parent.Link, LocalIP: parent.IP,
		MTU: overlay.MTUFor(parent.MTU, parent.IP.Is6()), MAC: overlay.StableMAC(p.cfg.Node),
	}, nil
}

// publish writes this node's tunnel endpoint on its Node when it differs
// from what node (the cache's, nil when missing) carries.
func (p *VTEPPart) publish(ctx context.Context, node *corev1.Node, cfg overlay.Config) error {
	if node == nil {
		return fmt.Errorf("node %s: %w", p.cfg.Node, apierrors.NewNotFound(corev1.Resource("nodes"), p.cfg.Node))
	}
	ip, mac := cfg.LocalIP.String(), cfg.MAC.String()
	if node.Annotations[estuaryv1.AnnotationVTEPIP] == ip && node.Annotations[estuaryv1.AnnotationVTEPMAC] == mac {
		return nil
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q,%q:%q}}}`,
		estuaryv1.AnnotationVTEPIP, ip, estuaryv1.AnnotationVTEPMAC, mac)
	// A fresh object: the patch's answer must not land in the cache's Node.
	target := &corev1.Node{}
	target.Name = node.Name
	if err := p.cfg.Writer.Patch(ctx, target, client.RawPatch("application/merge-patch+json", patch)); err != nil {
		return fmt.Errorf("node %s: publish tunnel endpoint %s %s: %w", p.cfg.Node, ip, mac, err)
	}
	p.cfg.Log.Info("published tunnel endpoint", "node", p.cfg.Node, "ip", ip, "mac", mac)
	return nil
}
