package desired

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// The routing plan: every policy-routing table and rule priority estuary
// uses on a node, and which writer owns each, in one place. A rule's
// priority equals the number of the table it looks up, so `ip rule` reads
// as the plan below. Lower priorities are consulted first: a local pod
// (1000) wins over a remote overlay pod (1001), which wins over the
// underlay's per-subnet tables (1100-1999); the kernel's main table (32766)
// comes after all of them.
//
//	table/priority  name                    owner       holds
//	1000            estuary-local-pods      local-pods  one route per local pod address, via its host veth
//	1001            estuary-overlay         overlay     every overlay subnet, on-link on the VXLAN device
//	1002            estuary-overlay-nodes   overlay     remote node addresses and underlay subnets, for overlay sources
//	1003-1099       (reserved)              overlay
//	1100-1999       estuary-underlay-<n>    underlay    one table per underlay subnet slot: on-link, then gateway routes
//
// The plan's other kernel objects, each with the one writer that creates
// and deletes it, by the names and numbers defined below:
//
//	object                                   name                          owner
//	VXLAN device                             estvx… (OverlayDevicePrefix)  overlay
//	host side of a pod's veth                est<11 hex> (HostVethPrefix)  local-pods
//	802.1Q sub-interface                     alias VLANMarker              underlay
//	nftables table ip and ip6, its chain     estuary, postrouting          overlay (source NAT)
//	  and sets                               nat-sources, cluster
//	tc filter on a device's ingress          cls_bpf prio 0xe5 handle 1    fast-path
//	  (on the shared clsact qdisc)           (TCPriority, TCHandle)
//
// A sub-interface is the underlay's by its alias alone: `<uplink>.<id>` is
// also how an administrator names one, and estuary uses such a link but never
// deletes it. Every device estuary names starts with DevicePrefix.
//
// Each writer is an Owner, and its Ownership is derived from these ranges
// (Owner.Ownership), so no writer deletes what another wrote: local-pods
// owns table 1000, the overlay 1001-1099, the underlay 1100-1999, and
// DefaultOwnership, used to find leftovers, all of 1000-1999. Every writer
// goes through the same reconcile (read, Diff under its Ownership, apply
// in the Plan's order, read again); what differs is only its desired state.
const (
	// TableLocalPods holds one route per local pod address; the rule
	// `from all lookup 1000` is at PriorityLocalPods.
	TableLocalPods    = 1000
	PriorityLocalPods = TableLocalPods

	// TableOverlaySubnets holds every overlay subnet on the VXLAN device;
	// the rule `from all lookup 1001` is at PriorityOverlaySubnets.
	TableOverlaySubnets    = 1001
	PriorityOverlaySubnets = TableOverlaySubnets
	// TableOverlayNodes holds remote node addresses and the underlay
	// subnets on the VXLAN device; the rules `from <overlay cidr> lookup
	// 1002` are at PriorityOverlayNodes.
	TableOverlayNodes    = 1002
	PriorityOverlayNodes = TableOverlayNodes
	// OverlayLast is the last table and priority of the overlay's range.
	OverlayLast = 1099

	// TableUnderlayFirst and TableUnderlayLast bound the underlay's
	// per-subnet tables; slot n is table and priority TableUnderlayFirst+n.
	TableUnderlayFirst = 1100
	TableUnderlayLast  = 1999
)

// Owner names one writer of the routing plan.
type Owner string

// The plan's writers.
const (
	// OwnerLocalPods writes table 1000 from the node's endpoint store
	// (package podnet) and the shared rule `from all lookup 1000`. The
	// rule is added but never deleted: it is one per family, and an
	// empty table 1000 routes nothing.
	OwnerLocalPods Owner = "local-pods"
	// OwnerOverlay writes tables and rules 1001-1099, the tunnel
	// device's FDB and neighbours (package overlay).
	OwnerOverlay Owner = "overlay"
	// OwnerUnderlay writes tables and rules 1100-1999, the vlan-ifs'
	// proxy neighbours and enhanced addresses (package underlay).
	OwnerUnderlay Owner = "underlay"
	// OwnerFastPath attaches the fast path's BPF program as the tc filter
	// TCPriority/TCHandle on devices' ingress (package fastpath). It writes
	// no route, rule, neighbour or address.
	OwnerFastPath Owner = "fast-path"
)

// Devices estuary makes, by owner.
const (
	// DevicePrefix starts every device name estuary chooses; DefaultOwnership
	// owns the devices named so.
	DevicePrefix = "est"
	// OverlayDevicePrefix starts the overlay's tunnel device names.
	OverlayDevicePrefix = DevicePrefix + "vx"
	// HostVethPrefix starts the host side of every pod veth (local-pods).
	HostVethPrefix = DevicePrefix
	// VLANMarker is the alias (IFLA_IFALIAS, `ip link set ... alias`) the
	// underlay writes on every 802.1Q link it creates: only marked links
	// are ever deleted or re-created. The kernel keeps the alias for the
	// link's lifetime and shows it in `ip link show`.
	VLANMarker = "estuary:vlan"
)

// HostVethName names the host side of an attachment's veth: HostVethPrefix
// and 11 hex digits of a hash of the container ID and interface name, so the
// name is a function of the attachment alone (the daemon finds a pod's veth
// again after a restart, and `kubectl estuary policy` names its chains, from
// those two strings) and fits the kernel's 15 bytes.
func HostVethName(containerID, ifName string) string {
	sum := sha256.Sum256([]byte(containerID + "/" + ifName))
	return HostVethPrefix + hex.EncodeToString(sum[:])[:11]
}

// nftables objects of the overlay's source NAT: one table per family
// (ip and ip6), estuary's wholly; nothing outside it is read or written.
const (
	NATTable      = "estuary"
	NATChain      = "postrouting"
	NATSetSources = "nat-sources"
	NATSetCluster = "cluster"
)

// The fast path's tc filter on a device's ingress: one cls_bpf filter in
// direct-action mode at this priority and handle on the clsact qdisc. The
// qdisc is shared with anything else that uses tc on the device and is never
// removed while another filter is on it; only the filter is estuary's.
const (
	TCPriority = 0xe5
	TCHandle   = 1
)

// Owners lists the routing plan's writers in the order a node applies them
// (the fast path, which writes no routing object, is not among them).
func Owners() []Owner { return []Owner{OwnerLocalPods, OwnerOverlay, OwnerUnderlay} }

// Ownership is the part of the plan o writes: routes of its tables whatever
// their protocol, rules at its priorities, and its devices' neighbours and
// FDB entries. The underlay's neighbours and addresses depend on its input
// (package underlay narrows them from all proxy entries and marked
// addresses); local-pods owns no rule, neighbour or
// address. An unknown owner owns nothing.
func (o Owner) Ownership() Ownership {
	// An empty range (min > max) owns no table or rule; a zero one would
	// own table or priority 0.
	own := Ownership{Owner: o, Protocol: ProtocolEstuary, RoutesByTable: true, NoAddrs: true,
		TableMin: 1, TableMax: 0, PriorityMin: 1, PriorityMax: 0}
	switch o {
	case OwnerLocalPods:
		own.TableMin, own.TableMax = TableLocalPods, TableLocalPods
	case OwnerOverlay:
		own.TableMin, own.TableMax = TableOverlaySubnets, OverlayLast
		own.PriorityMin, own.PriorityMax = PriorityOverlaySubnets, OverlayLast
		own.DevicePrefix = OverlayDevicePrefix
	case OwnerUnderlay:
		own.TableMin, own.TableMax = TableUnderlayFirst, TableUnderlayLast
		own.PriorityMin, own.PriorityMax = TableUnderlayFirst, TableUnderlayLast
		own.NoAddrs = false
		// Proxy entries; package underlay narrows this to those in its
		// input's subnets or on the sub-interfaces it made.
		own.Neighs = func(n Neigh) bool { return n.Proxy }
	}
	return own
}

// TableName is the readable name of one of estuary's tables (what
// /etc/iproute2/rt_tables.d/estuary.conf would name it), or "" for a
// number outside the plan.
func TableName(table int) string {
	switch {
	case table == TableLocalPods:
		return "estuary-local-pods"
	case table == TableOverlaySubnets:
		return "estuary-overlay"
	case table == TableOverlayNodes:
		return "estuary-overlay-nodes"
	case table >= TableUnderlayFirst && table <= TableUnderlayLast:
		return "estuary-underlay-" + strconv.Itoa(table-TableUnderlayFirst)
	}
	return ""
}

// RTTablesConf is the iproute2 names file of the plan (installed as
// /etc/iproute2/rt_tables.d/estuary.conf), so that `ip rule` and `ip
// route show table` print estuary-overlay rather than 1001.
func RTTablesConf() []byte {
	var b strings.Builder
	b.WriteString("# estuary's policy-routing tables (internal/dataplane/desired/routing.go).\n")
	for t := TableLocalPods; t <= TableUnderlayLast; t++ {
		if name := TableName(t); name != "" {
			b.WriteString(strconv.Itoa(t) + "\t" + name + "\n")
		}
	}
	return []byte(b.String())
}
