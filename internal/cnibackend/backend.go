package cnibackend

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"google.golang.org/protobuf/proto"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/internal/cnibackend/ipwait"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/pkg/family"
)

// Addresses supplies a pod's addresses. Wait blocks until they are known or
// ctx ends; ipwait.Waiter implements it over an IPInstance informer,
// ipwait.Static over a map.
type Addresses interface {
	Wait(ctx context.Context, podNamespace, podName, podUID string) ([]ipwait.Address, error)
}

// Readiness is the last step of an Add: checks and announcements a pod's
// addresses need on the node's networks (an underlay's duplicate address
// probe, gateway check and gratuitous ARP); segment.Checks implements it.
// The addresses come resolved from Addresses, so it reads nothing else.
type Readiness interface {
	PodReady(ctx context.Context, addrs []ipwait.Address) error
}

// DefaultAddressTimeout bounds how long Add waits for a pod's addresses.
const DefaultAddressTimeout = 30 * time.Second

// Config configures a Backend.
type Config struct {
	// Plumber plumbs the pods' interfaces in the node's namespace. Required.
	Plumber *podnet.Plumber
	// Addresses supplies pod addresses. Required.
	Addresses Addresses
	// AddressTimeout bounds the wait for a pod's addresses;
	// DefaultAddressTimeout if zero.
	AddressTimeout time.Duration
	// Readiness checks the pod's addresses on the node's networks once its
	// interface is built, before Add succeeds; nil checks nothing.
	Readiness Readiness
	// MTU of both veth ends; 0 keeps the kernel's default.
	MTU int
	// UnderlayMTU replaces MTU for a pod whose addresses are all on Underlay
	// networks (no tunnel header to make room for); 0 means MTU.
	UnderlayMTU int
}

// Backend runs the CNI requests of the node's pods. It keeps no state of
// its own: everything it needs is derived from the Attachment, the pod's
// records and the kernel.
type Backend struct {
	cfg Config
}

var _ cniserver.Backend = (*Backend)(nil)

// New returns a Backend for cfg.
func New(cfg Config) (*Backend, error) {
	if cfg.Plumber == nil {
		return nil, errors.New("node: Config.Plumber is required")
	}
	if cfg.Addresses == nil {
		return nil, errors.New("node: Config.Addresses is required")
	}
	if cfg.AddressTimeout <= 0 {
		cfg.AddressTimeout = DefaultAddressTimeout
	}
	if cfg.MTU < 0 {
		return nil, fmt.Errorf("node: MTU %d is negative", cfg.MTU)
	}
	if cfg.UnderlayMTU < 0 {
		return nil, fmt.Errorf("node: UnderlayMTU %d is negative", cfg.UnderlayMTU)
	}
	return &Backend{cfg: cfg}, nil
}

// mtuFor is the MTU of a pod with addrs: UnderlayMTU when every address is
// on an Underlay network, else MTU (which fits the tunnel).
func (b *Backend) mtuFor(addrs []ipwait.Address) int {
	if b.cfg.UnderlayMTU == 0 || len(addrs) == 0 {
		return b.cfg.MTU
	}
	for _, a := range addrs {
		if !a.Underlay {
			return b.cfg.MTU
		}
	}
	return b.cfg.UnderlayMTU
}

// podRef names the attachment's pod in errors.
func podRef(a cniserver.Attachment) string {
	if a.PodName == "" {
		return "container " + a.ContainerID
	}
	return "pod " + a.PodNamespace + "/" + a.PodName
}

// spec is the attachment's interface for podnet.
func spec(a cniserver.Attachment, ips []netip.Addr, mac desired.MAC, mtu int) podnet.Spec {
	return podnet.Spec{ContainerID: a.ContainerID, IfName: a.IfName, Netns: a.Netns, IPs: ips, MAC: mac, MTU: mtu}
}

// Add builds the attachment's interface and returns its configuration.
func (b *Backend) Add(ctx context.Context, a cniserver.Attachment) (*cniv1.AddReply, error) {
	addrs, err := b.waitAddresses(ctx, a)
	if err != nil {
		return nil, err
	}
	mac, err := pinnedMAC(addrs)
	if err != nil {
		return nil, cniserver.WithReason(cniserver.ReasonIPAMRefused, fmt.Errorf("%s: %w", podRef(a), err))
	}
	ips := make([]netip.Addr, 0, len(addrs))
	for _, ad := range addrs {
		ips = append(ips, ad.IP.Addr())
	}
	s := spec(a, ips, mac, b.mtuFor(addrs))
	created, err := b.cfg.Plumber.Plumb(s)
	err = plumbError(a, err)
	if err == nil && b.cfg.Readiness != nil {
		if rerr := b.cfg.Readiness.PodReady(ctx, addrs); rerr != nil {
			err = cniserver.WithReason(cniserver.ReasonSegmentCheck, fmt.Errorf("%s: %w", podRef(a), rerr))
		}
	}
	if err != nil {
		if created {
			if derr := b.cfg.Plumber.Unplumb(s.HostVeth()); derr != nil {
				err = errors.Join(err, fmt.Errorf("%s: clean up: %w", podRef(a), derr))
			}
		}
		return nil, err
	}
	ifc, err := b.cfg.Plumber.Describe(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", podRef(a), err)
	}
	return reply(ifc, s), nil
}

// plumbError marks an error of podnet with its Reason: netns when the
// pod's namespace could not be opened, else dataplane.
func plumbError(a cniserver.Attachment, err error) error {
	if err == nil {
		return nil
	}
	reason := cniserver.ReasonDataplane
	if errors.Is(err, podnet.ErrPodNetns) {
		reason = cniserver.ReasonNetns
	}
	return cniserver.WithReason(reason, fmt.Errorf("%s: %w", podRef(a), err))
}

// reply reports the interface in CNI terms: both ends with the MACs read
// back, each address as the pod holds it (/32, /128) with the link-local
// gateway, and the pod's default routes.
func reply(ifc podnet.Interface, s podnet.Spec) *cniv1.AddReply {
	r := &cniv1.AddReply{Interfaces: []*cniv1.Interface{
		{Name: ifc.Host.Name, Mac: ifc.Host.MAC.String(), Mtu: uint32(s.MTU)},
		{Name: ifc.Pod.Name, Mac: ifc.Pod.MAC.String(), Mtu: uint32(s.MTU), Sandbox: s.Netns},
	}}
	for _, ad := range ifc.Addrs {
		r.Ips = append(r.Ips, &cniv1.IPConfig{
			Interface: proto.Int32(1),
			Address:   ad.Prefix.String(),
			Gateway:   ad.Gateway.String(),
		})
	}
	for _, rt := range ifc.Routes {
		r.Routes = append(r.Routes, &cniv1.Route{Dst: rt.Dst.String(), Gw: rt.Gw.String()})
	}
	return r
}

// waitAddresses waits for the pod's addresses. Its errors carry their
// cniserver.Reason: records that cannot be used are ipam_refused, no
// records within AddressTimeout ipam_timeout, a runtime that gave up first
// canceled, a wait for the node's BGP sessions bgp_session.
func (b *Backend) waitAddresses(ctx context.Context, a cniserver.Attachment) ([]ipwait.Address, error) {
	wctx, cancel := context.WithTimeout(ctx, b.cfg.AddressTimeout)
	defer cancel()
	addrs, err := b.cfg.Addresses.Wait(wctx, a.PodNamespace, a.PodName, a.PodUID)
	if se := (*ipwait.SessionError)(nil); errors.As(err, &se) {
		err = cniserver.WithReason(cniserver.ReasonBGPSession, err)
	}
	if err != nil && wctx.Err() == nil {
		// The records are there but unusable (a malformed field): waiting
		// longer would not help, and the error says why.
		return nil, cniserver.WithReason(cniserver.ReasonIPAMRefused, fmt.Errorf("%s: its addresses: %w", podRef(a), err))
	}
	if err != nil {
		reason := cniserver.ReasonIPAMTimeout
		if ctx.Err() != nil {
			reason = cniserver.ReasonCanceled
		}
		return nil, cniserver.WithReason(reason, fmt.Errorf("%s: no addresses within %s: %w", podRef(a), b.cfg.AddressTimeout, err))
	}
	if len(addrs) == 0 {
		return nil, cniserver.WithReason(cniserver.ReasonIPAMRefused, fmt.Errorf("%s: no addresses allocated", podRef(a)))
	}
	for _, ad := range addrs {
		if !ad.IP.IsValid() || (ad.Family != family.Of(ad.IP.Addr()) && ad.Family != "") {
			return nil, cniserver.WithReason(cniserver.ReasonIPAMRefused,
				fmt.Errorf("%s: invalid address %v (family %q)", podRef(a), ad.IP, ad.Family))
		}
	}
	return addrs, nil
}

// Del removes the attachment's veth pair. A missing interface or namespace
// is success.
func (b *Backend) Del(_ context.Context, a cniserver.Attachment) error {
	if err := b.cfg.Plumber.Unplumb(podnet.HostVethName(a.ContainerID, a.IfName)); err != nil {
		return cniserver.WithReason(cniserver.ReasonDataplane, fmt.Errorf("%s: %w", podRef(a), err))
	}
	return nil
}

// Check verifies the attachment against the kernel and the recorded
// endpoint; the error lists everything that is missing.
func (b *Backend) Check(_ context.Context, a cniserver.Attachment, ep endpointstore.Endpoint) error {
	ips := make([]netip.Addr, 0, len(ep.IPs))
	for _, s := range ep.IPs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return cniserver.WithReason(cniserver.ReasonStore, fmt.Errorf("%s: recorded address %q: %w", podRef(a), s, err))
		}
		ips = append(ips, p.Addr())
	}
	err := b.cfg.Plumber.Check(spec(a, ips, desired.MAC{}, 0))
	if m := (*podnet.Mismatch)(nil); errors.As(err, &m) {
		return cniserver.WithReason(cniserver.ReasonMismatch, fmt.Errorf("%s: %w", podRef(a), err))
	}
	return plumbError(a, err)
}

// Ready reports whether the host namespace can be opened.
func (b *Backend) Ready(_ context.Context) error {
	return b.cfg.Plumber.Ready()
}
