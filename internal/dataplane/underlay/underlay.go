// Package underlay computes and applies the underlay data path of a node:
// the 802.1Q sub-interfaces of its VLAN networks, one policy rule and
// routing table per local underlay subnet (VLAN or BGP mode), the proxy
// neighbours that make the node answer the segment's ARP/NDP for its VLAN
// pods, and the "enhanced address" that gives the node's own ARP requests
// on behalf of pods a sender inside the pods' subnet. Desired is pure;
// Agent applies.
//
// # Design
//
// Pods on the segment, the node as their router. An underlay pod is plumbed
// like any other (podnet: a /32 on a veth, default via 169.254.1.1, table
// 1000), so the node routes every packet it sends. For a local pod of
// underlay subnet S the node adds rule `from S lookup 1100+n` (priority
// 1100+n, after podnet's 1000 and the overlay's 1001/1002) and table 1100+n
// with `S dev <vlan-if> scope link` and `default via <gateway> dev
// <vlan-if>`: same-segment destinations are reached directly, the rest via
// the segment's router, always with the pod's own source address (no NAT).
// Inbound, the segment resolves a pod's address by ARP; a proxy neighbour
// entry per local pod on the vlan-if makes the node answer with its own MAC
// (proxy_delay 0, else replies to broadcasts wait up to 0.8 s; forwarding 1,
// without which the kernel does not proxy) and table 1000 delivers.
// Nothing is written for a subnet without local pods, and everything of a
// subnet is kept while it has one.
//
// BGP subnets. A subnet of a BGP-mode network has no segment of its own:
// its pods' /32s are announced to the fabric by the node's BGP speaker
// (package bgp), and the fabric delivers to the node. Its table holds only
// `default via <peer> dev <uplink>`, the peer being the network's first
// peer of the subnet's family inside the prefix of one of the node's own
// addresses on the uplink (Input.NodeAddrs): the kernel accepts only an
// on-link next hop. A subnet none of whose peers is on the uplink's
// networks is left out and reported. No proxy neighbours (nobody ARPs for
// a routed /32) and no enhanced address (the node never ARPs for a peer in
// the pods' subnet). netID is the AS number there, not a VLAN id.
//
// The vlan-if. netID (the Subnet's override, else the Network's) 0 means
// untagged: the uplink NIC itself. Otherwise an 802.1Q sub-interface named
// `<nic>.<id>` (what iproute2 and most distributions use) when that fits the
// kernel's 15 bytes, else `est` + 6 hex digits of SHA-256 over the NIC name
// + `.<id>` (at most 14 bytes, never one of podnet's `est` + 11 hex names,
// which have no dot). Links estuary creates carry the alias
// desired.VLANMarker; only marked links are deleted (when no local subnet uses
// them any more) or re-created. A sub-interface of the wanted name, id and
// parent that an administrator made is used as it is and never deleted.
//
// Table numbers. Table and priority 1100+n must be the same on every node
// and across daemon restarts, and a subnet's number must not move while
// others come and go: a renumbering rewrites the tables in place, and while
// it runs rule 1100+n briefly sends S's pods through a table holding another
// subnet's default route. Position in the sorted list of subnets would move
// every later subnet on each insert. Instead n is SHA-256(subnet name) mod
// 900, with collisions resolved by linear probing in order of creation
// (creation time, then name): a new subnet only ever takes a free slot
// (short of one created within the same second as an older one, which
// its name then orders), and an existing subnet moves only when an older
// subnet it collided with is deleted. The input lists every underlay subnet of the cluster (Cluster),
// not only this node's, so that all nodes probe the same sequence.
//
// The enhanced address. When the node forwards a pod's packet on the
// segment it must resolve the next hop (the gateway, or a peer in S) by
// ARP, and the kernel picks the request's sender address from the outgoing
// link: the first primary address with scope link or global whose prefix
// contains the target (inet_select_addr). The node has no address in S, so
// without more the request carries the node's own address, a sender outside
// the target's subnet, which some switches and routers drop (or learn a
// wrong binding from). Each local subnet therefore gets one address of S on
// its vlan-if: the lowest local pod address, with S's prefix length (so the
// kernel finds it for any target in S), scope link (so source address
// selection for the node's own traffic never picks it) and noprefixroute
// (so no route for S appears in main). The kernel still adds `local <addr>`
// to table local for it, which would make the node take the pod's packets
// for itself (and drop the pod's own packets as martians from a local
// address). Agent deletes that route right after writing the address
// (Hidden lists the routes to delete), so the window in which the node
// answers for that pod itself is two netlink calls long. The kernel has
// no flag to add an address without its local route (noprefixroute
// suppresses only the prefix route; the subnet's broadcast route in table
// local stays, harmlessly). No address is added when the node already
// holds one in S on that link (Input.NodeAddrs). When the lowest pod
// leaves, the old address is deleted before the new one is added: added
// first, the new one would be the old one's secondary, and the kernel
// deletes secondaries with their primary. IPv6 needs none:
// neighbour solicitations are sent from the link-local address.
//
// Link flaps. Taking the vlan-if down and up makes the kernel flush the
// routes through it (the per-subnet tables), its neighbour and proxy
// entries, and re-add the local routes of its addresses. Nothing of it is
// event-driven here: the caller's periodic Apply repairs all three (the
// netns test does exactly this), so it must run on a resync timer as well
// as on API changes.
//
// Before a pod is ready. Probe (ARP duplicate address detection, RFC
// 5227), CheckGateway (resolve the subnet's gateway with the pod's address
// as sender) and Announce (gratuitous ARP, so the gateway's cache follows
// a pod with a fixed address to its new node) are the per-pod checks meant
// for the CNI path on the pod's segment (it does not call them yet); they
// use ops' packet-socket helpers and write no state.
//
// IPv6 forwarding and router advertisements. A link that forwards IPv6
// ignores router advertisements unless accept_ra is 2; on an uplink that
// carries an IPv6 underlay subnet and had accept_ra 1, Apply sets 2, so a
// node that learns its own routes by RA keeps doing so. It is not set back
// when the underlay leaves the node.
//
// Ownership. The underlay reconcile shares the namespace with podnet
// (table and rule 1000) and the overlay (tables and priorities 1001-1099,
// estvx* devices), and its vlan-if is often the node's own NIC. It owns
// routes of tables 1100-1999 by table alone, rules at priorities 1100-1999,
// and, among the objects it reads, only: proxy neighbour entries whose
// address lies in an underlay subnet of the cluster or that sit on a marked
// sub-interface; IPv4 addresses with estuary's mark (scope link,
// noprefixroute) inside an underlay subnet or on a marked sub-interface;
// on no unmarked est* link (podnet's veths, the overlay's estvx*).
// The node's other neighbours and addresses (including link-local ones
// NetworkManager marks noprefixroute) are never read into the diff, so they
// are never deleted.
//
// NAT. Underlay subnets are never masqueraded by default: the segment
// (or the fabric) routes pod addresses. A Subnet with natOutgoing true is
// reported by NATSources for the overlay's NAT table (overlay
// Input.UnderlayNAT), which masquerades it to the address of the outgoing
// link for destinations outside the cluster; this package writes no NAT.
package underlay

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// Constants of the underlay; its tables and rule priorities are in the
// routing plan (internal/dataplane/desired, routing.go).
const (
	// Slots is the number of per-subnet tables, desired.TableUnderlayFirst
	// to desired.TableUnderlayLast (the routing plan); slot n is table and
	// priority desired.TableUnderlayFirst+n.
	Slots = desired.TableUnderlayLast - desired.TableUnderlayFirst + 1
	// LocalTable is the kernel's table of local and broadcast routes.
	LocalTable = desired.LocalTable
	// RouteLocal is the kernel's route type of a local address (RTN_LOCAL).
	RouteLocal = desired.RouteLocal
	// MaxVLAN is the highest 802.1Q id.
	MaxVLAN = 4094
)

// Input is everything the underlay data path of a node depends on.
type Input struct {
	// Uplink is the node's NIC on the underlay segments: the parent of
	// every sub-interface, and the vlan-if of untagged networks.
	Uplink string
	// BGPUplink is the NIC of the BGP networks when they use another link
	// than the VLAN networks; empty: Uplink.
	BGPUplink string
	// Networks are the underlay networks (VLAN and BGP mode) whose domain
	// holds this node.
	Networks []Network
	// Cluster lists every underlay subnet of the cluster, of any network
	// and mode: it fixes table numbers and which neighbours and addresses
	// the reconcile owns. Local subnets missing from it are numbered after
	// it.
	Cluster []SubnetRef
	// NodeAddrs are addresses the node itself holds (not estuary's marked
	// ones), with their prefix lengths. A subnet with a node address inside
	// it on its vlan-if needs no enhanced address; a BGP peer inside the
	// prefix of one on the uplink is reachable.
	NodeAddrs []desired.Addr
}

// Mode is an underlay network's mode.
type Mode string

// Modes of an underlay network; the empty mode is ModeVLAN.
const (
	ModeVLAN Mode = "VLAN"
	ModeBGP  Mode = "BGP"
)

// Network is an underlay network.
type Network struct {
	Name string
	// Mode is VLAN (also when empty) or BGP.
	Mode Mode
	// VLAN is a VLAN network's netID: 0 untagged, 1-4094 tagged. A BGP
	// network's netID is its AS number and is not read here.
	VLAN int
	// Peers are a BGP network's peer addresses in the Network's order: the
	// first of a subnet's family inside the prefix of a node address on
	// the uplink (Input.NodeAddrs) is the default gateway of its subnets.
	Peers   []netip.Addr
	Subnets []Subnet
}

// IsBGP reports whether the network is in BGP mode.
func (n Network) IsBGP() bool { return n.Mode == ModeBGP }

// Subnet is one subnet of a network, with this node's pods in it.
type Subnet struct {
	Name    string
	CIDR    netip.Prefix
	Gateway netip.Addr
	// VLAN overrides the network's VLAN id when not nil.
	VLAN *int
	// NATOutgoing is the Subnet's natOutgoing (false unless set).
	NATOutgoing bool
	// LocalPods are the addresses of pods plumbed on this node; those
	// outside CIDR are ignored.
	LocalPods []netip.Addr
}

// SubnetRef identifies a subnet of the cluster for table numbering.
type SubnetRef struct {
	Name    string
	CIDR    netip.Prefix
	Created time.Time
}

// VLANName returns the vlan-if of VLAN id on the NIC uplink: uplink itself
// for id 0, `<uplink>.<id>` when it fits 15 bytes, else `est<6 hex of
// SHA-256(uplink)>.<id>`.
func VLANName(uplink string, id int) string {
	if id == 0 {
		return uplink
	}
	suffix := "." + strconv.Itoa(id)
	if len(uplink)+len(suffix) <= 15 {
		return uplink + suffix
	}
	sum := sha256.Sum256([]byte(uplink))
	return desired.DevicePrefix + hex.EncodeToString(sum[:3]) + suffix
}

// Numbering assigns each subnet of refs its slot n (table and priority
// desired.TableUnderlayFirst+n): SHA-256 of the name mod Slots, probing linearly in order of
// creation. Subnets beyond Slots get none.
func Numbering(refs []SubnetRef) map[string]int {
	sorted := slices.Clone(refs)
	slices.SortStableFunc(sorted, func(a, b SubnetRef) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.Name, b.Name))
	})
	out := make(map[string]int, len(sorted))
	taken := make([]bool, Slots)
	for _, r := range sorted {
		if _, dup := out[r.Name]; dup || len(out) == Slots {
			continue
		}
		sum := sha256.Sum256([]byte(r.Name))
		n := int(binary.BigEndian.Uint64(sum[:8]) % Slots)
		for taken[n] {
			n = (n + 1) % Slots
		}
		taken[n] = true
		out[r.Name] = n
	}
	return out
}

// Ownership is the underlay reconcile's base ownership (desired.OwnerUnderlay
// of the routing plan): routes of tables 1100-1999 whatever their protocol,
// rules at priorities 1100-1999. Which neighbours and addresses it owns
// depends on the input (see the package design); Agent narrows what it
// reads accordingly.
func Ownership() desired.Ownership { return desired.OwnerUnderlay.Ownership() }

// vlanOf returns the subnet's effective VLAN id; a BGP subnet is always on
// the uplink itself.
func vlanOf(n Network, s Subnet) int {
	if n.IsBGP() {
		return 0
	}
	if s.VLAN != nil {
		return *s.VLAN
	}
	return n.VLAN
}

func validVLAN(id int) error {
	if id < 0 || id > MaxVLAN {
		return fmt.Errorf("vlan id %d out of range 0-%d", id, MaxVLAN)
	}
	return nil
}

// uplinkOf is the NIC of network n on the node.
func (in Input) uplinkOf(n Network) string {
	if n.IsBGP() && in.BGPUplink != "" {
		return in.BGPUplink
	}
	return in.Uplink
}

// parentOf is the link device d is made on: the BGP networks' uplink for
// theirs, else Uplink.
func (in Input) parentOf(d Device) string {
	if in.BGPUplink != "" && in.BGPUplink != in.Uplink && d.Name == VLANName(in.BGPUplink, d.VLAN) {
		return in.BGPUplink
	}
	return in.Uplink
}
