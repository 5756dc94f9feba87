// Package podnet owns the plumbing of a pod's network interface on a node:
// it is the daemon's cniserver.Backend. Add builds a veth pair between the
// host and the pod's network namespace, addresses the pod side and points it
// at the host; it writes the host route and policy rule that deliver the
// pod's address to it. Del removes it, Check verifies it, Ready says whether
// the host namespace can be reached. LocalPods (localpods.go) keeps the
// routes in line with the endpoint store from the daemon's loop.
//
// # Design
//
// Host as router. The pod's address sits alone on its interface as a /32
// (/128), with one default route via a link-local next hop (169.254.1.1,
// fe80::ecee:eeff:feee:eeee) that exists nowhere. Every packet the pod sends
// therefore goes to the host, which routes it: a local pod through the
// local-pods table 1000 (one `<podIP> dev <host veth> scope link` route per
// address, selected by the shared rule `from all lookup 1000` at priority
// 1000), everything else through the tables that come after it. No bridge,
// no per-node subnet, and a pod's address can live on any node.
//
// Permanent neighbour. The host side carries the fixed MAC ee:ee:ee:ee:ee:ee
// and the pod holds a PERMANENT neighbour entry gateway -> that MAC, so the
// pod never has to resolve its gateway and never sees it fail. Proxy ARP
// (IPv4) and a proxy NDP entry for the gateway (IPv6) on the host side are a
// second line: they answer should the entry be flushed from inside the pod
// (proxy ARP only while the host has a route towards 169.254.1.1 through
// another link, as a node's default route is).
// The fixed MAC also makes the host side's EUI-64 link-local address exactly
// fe80::ecee:eeff:feee:eeee, so the IPv6 gateway is a real address too.
//
// Pinned MAC. When the pod's records fix a MAC for its interface
// (Address.MAC), the pod side is created with it and reported with it;
// otherwise the kernel chooses it. Addresses that disagree on it fail Add
// before anything is made (mac.go).
//
// Naming. The host side is "est" followed by 11 hex digits of SHA-256 over
// the container ID and the interface name: 14 bytes (the kernel allows 15),
// inside estuary's device prefix (state.Ownership), and derived from the
// attachment's identity alone, so a retried Add, a Del and a GC find it even
// when the runtime sends no pod namespace/name (the server fills only the
// netns from its record). The pod's namespace/name is deliberately not used:
// a recreated pod's new sandbox can coexist briefly with its old one on the
// same node, and the two need different links. A collision of 44 bits is not
// assumed away: a host veth of that name that is not paired with this
// attachment's interface makes Add fail and is left alone.
//
// Idempotence. Every step checks or replaces: an existing pair that is this
// attachment's is reused, addresses, routes and neighbours are written with
// replace semantics, the shared rule's "exists" is success, sysctls are
// written only when they differ. A repeated Add returns the same reply. A
// failed Add deletes the pair it created (removing the pair removes its
// routes and neighbours with it), so nothing is left behind.
//
// Router advertisements. The first IPv6 pod turns on IPv6 forwarding for
// the node, which makes Linux ignore RAs on links at accept_ra 1; those of
// the node's own links are raised to 2 first (acceptra.go). Every host veth
// takes accept_ra 0, so no pod's RA reaches the node (hostSysctls).
//
// Namespaces. Kernel objects are written through ops handles bound to the
// host and pod namespaces; sysctls are written on a throw-away locked thread.
// The caller's thread never changes namespace. The host namespace is a
// parameter so that tests run against a namespace of their own.
package podnet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
	"github.com/estuary-cni/estuary/internal/node/store"
	"github.com/estuary-cni/estuary/pkg/family"
)

// HostVethPrefix starts every host-side veth name. Local pod routes go in
// state.TableLocalPods (the routing plan, internal/dataplane/state).
const HostVethPrefix = "est"

// Gateways and the host side's MAC, as the pod sees them.
var (
	GatewayIPv4 = netip.MustParseAddr("169.254.1.1")
	GatewayIPv6 = netip.MustParseAddr("fe80::ecee:eeff:feee:eeee")
	HostMAC     = state.MustParseMAC("ee:ee:ee:ee:ee:ee")
)

// Readiness is the last step of an Add: checks and announcements a pod's
// addresses need on the node's networks (an underlay's duplicate address
// probe, gateway check and gratuitous ARP); segment.Checks implements it.
// The addresses come resolved from Addresses, so it reads nothing else.
type Readiness interface {
	PodReady(ctx context.Context, addrs []Address) error
}

// DefaultAddressTimeout bounds how long Add waits for a pod's addresses.
const DefaultAddressTimeout = 30 * time.Second

// Config configures a Backend.
type Config struct {
	// HostNetns is the path of the node's network namespace; empty means the
	// namespace the process was started in.
	HostNetns string
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

// Backend plumbs pod interfaces. It keeps no state of its own: everything it
// needs is derived from the Attachment and read back from the kernel.
type Backend struct {
	cfg Config
}

var _ cniserver.Backend = (*Backend)(nil)

// New returns a Backend for cfg.
func New(cfg Config) (*Backend, error) {
	if cfg.Addresses == nil {
		return nil, errors.New("podnet: Config.Addresses is required")
	}
	if cfg.AddressTimeout <= 0 {
		cfg.AddressTimeout = DefaultAddressTimeout
	}
	if cfg.MTU < 0 {
		return nil, fmt.Errorf("podnet: MTU %d is negative", cfg.MTU)
	}
	if cfg.UnderlayMTU < 0 {
		return nil, fmt.Errorf("podnet: UnderlayMTU %d is negative", cfg.UnderlayMTU)
	}
	return &Backend{cfg: cfg}, nil
}

// mtuFor is the MTU of a pod with addrs: UnderlayMTU when every address is
// on an Underlay network, else MTU (which fits the tunnel).
func (b *Backend) mtuFor(addrs []Address) int {
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

// HostVethName returns the host side's name for an attachment: a function
// of its container ID and interface name only.
func HostVethName(a cniserver.Attachment) string {
	sum := sha256.Sum256([]byte(a.ContainerID + "/" + a.IfName))
	return HostVethPrefix + hex.EncodeToString(sum[:])[:11]
}

// podRef names the attachment's pod in errors.
func podRef(a cniserver.Attachment) string {
	if a.PodName == "" {
		return "container " + a.ContainerID
	}
	return "pod " + a.PodNamespace + "/" + a.PodName
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
	p, err := b.open(a, b.mtuFor(addrs))
	if err != nil {
		return nil, err
	}
	defer p.close()
	p.mac = mac
	created, err := p.ensureVeth()
	if err == nil {
		err = p.configure(addrs)
	}
	err = cniserver.WithReason(cniserver.ReasonDataplane, err)
	if err == nil && b.cfg.Readiness != nil {
		if rerr := b.cfg.Readiness.PodReady(ctx, addrs); rerr != nil {
			err = cniserver.WithReason(cniserver.ReasonSegmentCheck, fmt.Errorf("%s: %w", podRef(a), rerr))
		}
	}
	if err != nil {
		if created {
			if derr := p.host.Links().Delete(p.hostVeth); derr != nil {
				err = errors.Join(err, fmt.Errorf("%s: clean up: %w", podRef(a), derr))
			}
		}
		return nil, err
	}
	return p.reply(addrs)
}

// waitAddresses waits for the pod's addresses. Its errors carry their
// cniserver.Reason: records that cannot be used are ipam_refused, no
// records within AddressTimeout ipam_timeout, a runtime that gave up first
// canceled (unless the wait marked its own, as the BGP gate does).
func (b *Backend) waitAddresses(ctx context.Context, a cniserver.Attachment) ([]Address, error) {
	wctx, cancel := context.WithTimeout(ctx, b.cfg.AddressTimeout)
	defer cancel()
	addrs, err := b.cfg.Addresses.Wait(wctx, a.PodNamespace, a.PodName, a.PodUID)
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

// Del removes the attachment's veth pair. Deleting the host side removes the
// pod side and every route and neighbour entry on either, so no other pod's
// objects are touched. A missing interface or namespace is success.
func (b *Backend) Del(_ context.Context, a cniserver.Attachment) error {
	host, err := ops.Open(b.cfg.HostNetns)
	if err != nil {
		return cniserver.WithReason(cniserver.ReasonDataplane, fmt.Errorf("%s: host namespace: %w", podRef(a), err))
	}
	defer host.Close()
	if err := host.Links().Delete(HostVethName(a)); err != nil {
		return cniserver.WithReason(cniserver.ReasonDataplane, fmt.Errorf("%s: %w", podRef(a), err))
	}
	return nil
}

// Check verifies the attachment against the kernel and the recorded
// endpoint; the error lists everything that is missing.
func (b *Backend) Check(_ context.Context, a cniserver.Attachment, ep store.Endpoint) error {
	ips := make([]netip.Prefix, 0, len(ep.IPs))
	for _, s := range ep.IPs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return cniserver.WithReason(cniserver.ReasonStore, fmt.Errorf("%s: recorded address %q: %w", podRef(a), s, err))
		}
		ips = append(ips, p)
	}
	p, err := b.open(a, 0)
	if err != nil {
		return err
	}
	defer p.close()
	if errs := p.check(ips); len(errs) > 0 {
		return cniserver.WithReason(cniserver.ReasonMismatch, fmt.Errorf("%s: %w", podRef(a), errors.Join(errs...)))
	}
	return nil
}

// Ready reports whether the host namespace can be opened.
func (b *Backend) Ready(_ context.Context) error {
	h, err := ops.Open(b.cfg.HostNetns)
	if err != nil {
		return fmt.Errorf("host network namespace: %w", err)
	}
	h.Close()
	return nil
}

func gatewayOf(f family.Family) netip.Addr {
	if f == family.IPv6 {
		return GatewayIPv6
	}
	return GatewayIPv4
}

// hostPrefix is the address alone: /32 or /128.
func hostPrefix(a netip.Addr) netip.Prefix {
	return netip.PrefixFrom(a, a.BitLen())
}

func macString(m net.HardwareAddr) string { return m.String() }
