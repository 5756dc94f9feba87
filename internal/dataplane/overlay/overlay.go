// Package overlay computes and applies the VXLAN data path of a node: the
// overlay network's device, the routes and rules that steer pod traffic into
// it, the proxy neighbours and FDB entries that let remote nodes reach local
// pods, the answers to the kernel's neighbour misses, and the source NAT of
// traffic that leaves the cluster. Desired is pure; Agent applies.
//
// # Design
//
// Pods without per-node blocks. Pods hold /32 (/128) addresses from subnets
// that span every node, so no route can say "this block is behind that
// node". Instead every overlay subnet is routed onto the VXLAN device as an
// on-link destination (table 1001, `<cidr> dev estvxN scope link`, rule 1001
// `from all lookup 1001`): the kernel resolves the destination pod's address
// itself, with ARP or NDP on the VXLAN device. Local pods are matched first
// by podnet's table 1000 (rule 1000), so only remote pods reach table 1001.
//
// Who answers. Each node puts a proxy neighbour entry on its VXLAN device
// for every local pod, so a request for a pod arriving through the tunnel is
// answered by the pod's node with its VTEP MAC; the FDB (`<remote MAC> dst
// <remote VTEP>`) then carries the frame to that node. The device's MAC is
// StableMAC(node name), not random, so a re-created device (daemon upgrade,
// parent change) keeps the MAC other nodes have cached and published.
// proxy_delay is 0: the kernel otherwise delays proxy replies to broadcast
// requests by up to 0.8 s. forwarding must be on for the device to proxy,
// and rp_filter off, because a request from a remote node's address arrives
// on a device with no address of its own.
//
// Two ways to resolve. app_solicit=1 makes the kernel's first probe for an
// address a netlink message to user space instead of a broadcast; Answer
// replies to it at once from the cluster's view (pod IP -> node -> VTEP MAC)
// with a REACHABLE entry, never PERMANENT, so a pod that moves is resolved
// afresh once the entry ages. Unknown addresses, and every address while no
// answerer runs, fall through to the kernel's next probe, a broadcast that
// the all-zero FDB entries (one per remote VTEP, head-end replication)
// deliver to every node, where the proxy entry answers. The data path
// therefore works with the daemon down; the answerer only removes the
// broadcast and its one-second wait.
//
// Replies through the tunnel. A node reaching a remote pod sends from its own
// address; without more, the pod's reply (source: an overlay address) would
// leave its node through the physical network, which neither expects nor
// routes overlay sources, and the sending node, whose route to that source
// is the tunnel, would drop it under rp_filter. Rule 1002 `from <overlay
// cidr> lookup 1002` sends traffic from overlay pods to any other node's
// address (table 1002: `<node IP>/32 dev estvxN scope link`) through the
// tunnel instead, where the remote node answers ARP for its own address
// (for IPv6, whose neighbour discovery answers only for addresses on the
// receiving device, each node proxies its own addresses: Input.NodeIPs).
// The node -> pod path keeps the node's source address: it is not NATed.
// The rule keys on the source rather than on a connection mark, so it
// needs no conntrack state and also covers connections pods open to nodes.
//
// Overlay to underlay. Table 1002 also holds every underlay subnet of the
// cluster (VLAN and BGP; Input.Underlays) on the tunnel, with the subnet's
// gateway as a `throw` route (a physical router, reached through the node's
// own routing). An overlay pod's packet to an underlay pod therefore rides
// the tunnel to the underlay pod's node with its overlay source, and no
// physical router ever sees an overlay address. The destination is
// resolved like an overlay pod: the answerer knows every pod's node, and
// each node's proxy entries cover all its local pods (LocalPods holds them
// all, underlay ones included). The receiving node delivers through table
// 1000; the underlay pod's reply, to an overlay address, takes rule 1001
// back into the tunnel, and on the first node the reverse-path check of that
// reply (source: the underlay pod) finds table 1002's route on the tunnel.
// Underlay pods among themselves (rule 1002 keys on overlay sources only),
// and nodes reaching underlay pods (main table), still use the physical
// network. The cost: an overlay pod reaches no other host inside an
// underlay subnet than the gateway and the nodes (their /32 routes), since
// the tunnel resolves only pods and nodes. Under a strict "all" rp_filter
// (the device's own 0 does not lower it) a broadcast request from a node's
// address for an underlay pod fails that pod's node's reverse-path check
// (the node routes the pod's subnet to node addresses out of its physical
// link), so underlay pods are then resolved by the answerer alone.
//
// SNAT. One nftables table per family, `estuary`, wholly estuary's: a nat
// postrouting chain (priority 100) with one rule masquerading packets from
// a NATOutgoing overlay subnet, or from a natOutgoing underlay subnet of
// this node's domains (Input.UnderlayNAT), to a destination outside every
// estuary subnet that do not leave through the tunnel. Before it, a rule
// returns packets whose firewall mark carries kube-proxy's masquerade bit
// (Input.KubeProxyMark, read from kube-proxy's configuration by the
// daemon): kube-proxy masquerades those itself, and nothing is NATed twice
// or by the wrong party. Sets, not one rule per
// subnet, keep the rule constant while subnets change; the table is
// compared with what is wanted and, when it differs, rewritten in one
// atomic batch. kube-proxy's tables (iptables or nftables) are never read
// or written.
//
// Ownership. The overlay reconcile shares the host namespace with podnet,
// whose table-1000 routes carry estuary's protocol too, and with the
// underlay (package underlay), whose per-subnet tables and rules are
// 1100-1999. It therefore owns routes by table alone (tables 1001-1099),
// rules at priorities 1001-1099, neighbours and FDB entries on devices named
// estvx*, and no addresses; the host veths, rule 1000 and table 1000 are
// podnet's, tables and priorities 1100-1999 the underlay's.
//
// Kernel footprint. On a node with P local pods (overlay and underlay), N
// other nodes (each with A addresses of the overlay's families), S overlay
// subnets and U underlay subnets of the overlay's families (G of them with
// a gateway inside), the overlay keeps exactly (TestDesiredFootprint):
//
//   - one VXLAN device, estvx<VNI>;
//   - FDB: 2N entries, one all-zero flood entry and one `<MAC> dst <VTEP>`
//     per remote node (N without flooding, Input.NoFlood);
//   - proxy neighbours: P, plus this node's own IPv6 addresses on a
//     dual-stack overlay (IPv6 answers only for addresses on its device);
//   - routes: S in table 1001, N*A node /32s (/128s) plus U + G underlay
//     routes in table 1002;
//   - rules: one `lookup 1001` per family and one `from <cidr> lookup 1002`
//     per overlay subnet;
//   - nftables: one `estuary` table per family with one chain, at most two
//     rules (the masquerade, and the return of kube-proxy's mark) and
//     two interval sets, whatever S and U (a family with nothing to NAT
//     has none).
//
// Nothing grows with the number of remote pods: remote pods are resolved
// on demand (REACHABLE neighbour entries the kernel ages and bounds by its
// gc_thresh settings), never installed as permanent entries, so a node
// keeps O(N + P) entries where a per-pod design would keep O(pods in the
// cluster).
//
// Order of Apply. The device is created down, its sysctls are written, and
// only then is it brought up, so no packet meets it half configured; the
// reconcile then fills tables before adding the rules that point at them
// (dataplane.Reconciler's order), and the NAT table is rewritten last.
package overlay

import (
	"crypto/sha256"
	"net/netip"
	"strconv"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// Constants of the overlay; its tables and rule priorities are in the
// routing plan (internal/dataplane/desired, routing.go).
const (
	// DevicePrefix starts the VXLAN device's name.
	DevicePrefix = desired.OverlayDevicePrefix
	// DefaultPort is the VXLAN UDP port (the Linux kernel's, flannel's).
	DefaultPort = 8472
)

// Remote is another node's VTEP and its node addresses.
type Remote struct {
	Node    string
	VTEP    netip.Addr
	MAC     desired.MAC
	NodeIPs []netip.Addr
}

// Subnet is an overlay subnet (v4 or v6).
type Subnet struct {
	Name        string
	CIDR        netip.Prefix
	NATOutgoing bool
}

// Config is the VXLAN device of the overlay network.
type Config struct {
	Device  string      // DeviceName(netID)
	VNI     uint32      //
	Port    int         // UDP port, DefaultPort when 0
	Parent  string      // parent link name (resolved by ResolveParent)
	LocalIP netip.Addr  // VTEP address on the parent
	MTU     int         // device MTU, see MTUFor
	MAC     desired.MAC // StableMAC(nodeName): survives device re-creation
}

// Input is everything the overlay data path of a node depends on.
type Input struct {
	Config
	LocalPods       []netip.Addr   // addresses of pods plumbed on this node
	Remotes         []Remote       // other nodes; an entry with VTEP == LocalIP is skipped
	Subnets         []Subnet       // all overlay subnets
	ClusterPrefixes []netip.Prefix // every estuary subnet CIDR: never SNATed as destination
	// NodeIPs are this node's own addresses. Its IPv6 ones get a proxy
	// entry on the device: the kernel answers neighbour solicitations only
	// for addresses on the receiving device, so without one a remote pod's
	// reply to this node (rule 1002) could not resolve it. IPv4 needs
	// none: ARP answers for any local address.
	NodeIPs []netip.Addr
	// Underlays are the cluster's underlay subnets (VLAN and BGP): overlay
	// pods reach them through the tunnel (table 1002), never with their
	// overlay source on the physical network.
	Underlays []Underlay
	// UnderlayNAT are the underlay subnets with natOutgoing whose pods run
	// on this node (underlay.NATSources): masqueraded like the NATOutgoing
	// overlay subnets, in the same table.
	UnderlayNAT []netip.Prefix
	// KubeProxyMark is kube-proxy's masquerade mark (1 << masqueradeBit):
	// packets carrying it are left to kube-proxy's own masquerade. 0 adds
	// no such exception.
	KubeProxyMark uint32
	// NoFlood leaves out the all-zero FDB entries, so that only the
	// answerer resolves remote addresses (tests; diagnosis).
	NoFlood bool
}

// Underlay is an underlay subnet as the overlay routes it: CIDR into the
// tunnel, Gateway (when inside CIDR) thrown back to the node's own routing,
// since it is a router of the physical network, not a pod.
type Underlay struct {
	CIDR    netip.Prefix
	Gateway netip.Addr
}

// DeviceName returns the VXLAN device's name for netID: "estvx" and netID
// in decimal, at most 15 bytes.
func DeviceName(netID uint32) string {
	return DevicePrefix + strconv.FormatUint(uint64(netID), 10)
}

// StableMAC returns a locally administered unicast MAC derived from the
// node's name, so a node's VTEP MAC is the same across device re-creations.
func StableMAC(node string) desired.MAC {
	sum := sha256.Sum256([]byte("estuary-vtep/" + node))
	var m desired.MAC
	copy(m[:], sum[:len(m)])
	m[0] = (m[0] | 0x02) &^ 0x01
	return m
}

// VXLAN header overheads: outer IP + UDP + VXLAN + inner Ethernet.
const (
	overhead4 = 20 + 8 + 8 + 14
	overhead6 = 40 + 8 + 8 + 14
)

// MTUFor returns the VXLAN device's MTU on a parent of MTU parentMTU: 50
// bytes less for an IPv4 underlay, 70 for IPv6.
func MTUFor(parentMTU int, underlay6 bool) int {
	if underlay6 {
		return parentMTU - overhead6
	}
	return parentMTU - overhead4
}

// Ownership is what the overlay reconcile owns (desired.OwnerOverlay of the
// routing plan): routes in tables 1001-1099 whatever their protocol, rules
// at priorities 1001-1099, neighbours and FDB entries on estvx* devices, no
// addresses. It never claims table 1000, rule 1000 or host veths, nor the
// underlay's tables and rules 1100-1999.
func Ownership() desired.Ownership { return desired.OwnerOverlay.Ownership() }
