// Package podnet owns the plumbing of a pod's network interface on a node,
// on plain values: Plumb builds a veth pair between the host and the pod's
// network namespace for a Spec, addresses the pod side and points it at the
// host; it writes the host route and policy rule that deliver the pod's
// address to it. Unplumb removes the pair, Check verifies it, Describe reads
// it back, Ready says whether the host namespace can be reached and
// Interfaces lists the pairs found in the kernel (recover.go). LocalPods
// (localpods.go) keeps the local-pods routes in line with a list of pods.
// It knows nothing of CNI requests, pods' records or the endpoint store:
// package node runs an attachment through it.
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
// Pinned MAC. When a Spec fixes a MAC for the pod's interface (Spec.MAC),
// the pod side is created with it and reported with it; otherwise the
// kernel chooses it (mac.go).
//
// Naming. The host side is "est" followed by 11 hex digits of SHA-256 over
// the container ID and the interface name: 14 bytes (the kernel allows 15),
// inside estuary's device prefix (desired.Ownership), and derived from the
// attachment's identity alone, so a retried ADD, a DEL and a GC find it even
// when the runtime sends no pod namespace/name. The pod's namespace/name is
// deliberately not used: a recreated pod's new sandbox can coexist briefly
// with its old one on the same node, and the two need different links. A
// collision of 44 bits is not assumed away: a host veth of that name that is
// not paired with this Spec's interface makes Plumb fail and is left alone.
//
// Idempotence. Every step checks or replaces: an existing pair that is this
// Spec's is reused, addresses, routes and neighbours are written with
// replace semantics, the shared rule's "exists" is success, sysctls are
// written only when they differ. A repeated Plumb leaves the same interface.
// Plumb says whether it created the pair, so that its caller deletes it
// with Unplumb when Plumb or a later step fails (removing the pair removes
// its routes and neighbours with it), and nothing is left behind.
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
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/pkg/family"
)

// HostVethPrefix starts every host-side veth name; the routing plan
// (internal/dataplane/desired) names it with its owner. Local pod routes go in
// desired.TableLocalPods.
const HostVethPrefix = desired.HostVethPrefix

// Gateways and the host side's MAC, as the pod sees them.
var (
	GatewayIPv4 = netip.MustParseAddr("169.254.1.1")
	GatewayIPv6 = netip.MustParseAddr("fe80::ecee:eeff:feee:eeee")
	HostMAC     = desired.MustParseMAC("ee:ee:ee:ee:ee:ee")
)

// ErrPodNetns marks the failure to open a pod's network namespace.
var ErrPodNetns = errors.New("pod namespace")

// Spec is one pod interface as Plumb builds it.
type Spec struct {
	// ContainerID and IfName identify the attachment: they name the host
	// veth (HostVethName) and are recorded in its alias.
	ContainerID string
	IfName      string
	// Netns is the path of the pod's network namespace.
	Netns string
	// IPs are the pod's addresses; each sits alone (/32, /128) on IfName.
	IPs []netip.Addr
	// MAC is the pod side's pinned MAC; zero lets the kernel choose.
	MAC desired.MAC
	// MTU of both veth ends; 0 keeps the kernel's default.
	MTU int
}

// HostVeth is the name of the Spec's host side.
func (s Spec) HostVeth() string { return HostVethName(s.ContainerID, s.IfName) }

// HostVethName returns the host side's name for an attachment: a function
// of its container ID and interface name only (desired.HostVethName).
func HostVethName(containerID, ifName string) string {
	return desired.HostVethName(containerID, ifName)
}

// Plumber plumbs pod interfaces from one host namespace. It keeps no state
// of its own: everything it needs comes in a Spec or is read back from the
// kernel.
type Plumber struct {
	hostNetns string
}

// NewPlumber returns the Plumber of the node's network namespace at
// hostNetns; empty means the namespace the process was started in.
func NewPlumber(hostNetns string) *Plumber {
	return &Plumber{hostNetns: hostNetns}
}

// Plumb builds the Spec's interface. created says whether it made the pair,
// also when it fails after that: the caller then deletes it with Unplumb.
// A failure to open the pod's namespace is ErrPodNetns.
func (h *Plumber) Plumb(s Spec) (created bool, err error) {
	p, err := h.open(s)
	if err != nil {
		return false, err
	}
	defer p.close()
	created, err = p.ensureVeth()
	if err != nil {
		return created, err
	}
	return created, p.configure()
}

// Unplumb removes the pair whose host side is hostVeth. Deleting the host
// side removes the pod side and every route and neighbour entry on either,
// so no other pod's objects are touched. A missing interface or namespace
// is success.
func (h *Plumber) Unplumb(hostVeth string) error {
	host, err := ops.Open(h.hostNetns)
	if err != nil {
		return fmt.Errorf("host namespace: %w", err)
	}
	defer host.Close()
	return host.Links().Delete(hostVeth)
}

// Ready reports whether the host namespace can be opened.
func (h *Plumber) Ready() error {
	host, err := ops.Open(h.hostNetns)
	if err != nil {
		return fmt.Errorf("host network namespace: %w", err)
	}
	host.Close()
	return nil
}

// Link is one end of a pair as the kernel reports it.
type Link struct {
	Name string
	MAC  net.HardwareAddr
}

// PodAddr is one of the pod's addresses as it holds it (/32, /128), with
// the link-local gateway of its family.
type PodAddr struct {
	Prefix  netip.Prefix
	Gateway netip.Addr
}

// Route is one of the pod's routes.
type Route struct {
	Dst netip.Prefix
	Gw  netip.Addr
}

// Interface is a plumbed interface as the pod sees it: both ends (read back
// from the kernel), its addresses and its routes.
type Interface struct {
	Host, Pod Link
	Addrs     []PodAddr
	Routes    []Route
}

// Describe reads the Spec's interface back from the kernel.
func (h *Plumber) Describe(s Spec) (Interface, error) {
	p, err := h.open(s)
	if err != nil {
		return Interface{}, err
	}
	defer p.close()
	hl, err := p.host.Links().Get(p.hostVeth)
	if err != nil {
		return Interface{}, err
	}
	pl, err := p.pod.Links().Get(s.IfName)
	if err != nil {
		return Interface{}, err
	}
	out := Interface{Host: Link{Name: hl.Name, MAC: hl.MAC}, Pod: Link{Name: pl.Name, MAC: pl.MAC}}
	for _, ip := range s.IPs {
		out.Addrs = append(out.Addrs, PodAddr{Prefix: hostPrefix(ip), Gateway: gatewayOf(family.Of(ip))})
	}
	for _, rt := range p.podRoutes() {
		out.Routes = append(out.Routes, Route{Dst: rt.Dst, Gw: rt.Gw})
	}
	return out, nil
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
