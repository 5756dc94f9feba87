// Package desired owns the data plane's desired and observed kernel state as
// plain values (routes, policy rules, neighbours, FDB entries, addresses), the
// ownership predicate that says which of them estuary manages, and the pure
// Diff that turns desired and actual state into a Plan, and the node's plan
// of names (routing.go): every table, rule priority, device, nftables object
// and tc attachment estuary writes, each with the one writer (Owner) that
// owns it. It never talks to the kernel: the ops package reads and applies,
// taking those names from here; this package only computes.
package desired

import (
	"cmp"
	"fmt"
	"net/netip"

	"github.com/estuary-cni/estuary/pkg/family"
)

// RouteType is the kernel's route type (RTN_*).
type RouteType uint8

// Route types estuary writes or deletes. Other kernel types read back keep
// their value.
const (
	RouteUnicast RouteType = 1
	RouteLocal   RouteType = 2
	RouteThrow   RouteType = 9
)

// Scope is a route or address scope (RT_SCOPE_*).
type Scope uint8

// Scopes.
const (
	ScopeUniverse Scope = 0
	ScopeLink     Scope = 253
	ScopeHost     Scope = 254
)

// MainTable is the kernel's main routing table; a Route with Table 0 means it.
const MainTable = 254

// LocalTable is the kernel's table of local and broadcast routes.
const LocalTable = 255

// LocalRouteOf is the route the kernel adds to LocalTable for the address
// a on its device.
func LocalRouteOf(a Addr) Route {
	ip := a.Prefix.Addr().Unmap()
	return Route{Table: LocalTable, Dst: netip.PrefixFrom(ip, ip.BitLen()), Dev: a.Dev, Type: RouteLocal, Scope: ScopeHost}
}

// Route is one route. Dev is a link name; throw routes have neither Dev nor Gw.
// A route's identity in the kernel is its table and destination (estuary does
// not use metrics or TOS), so writing a route replaces any other route with
// the same table and destination.
type Route struct {
	Table    int
	Dst      netip.Prefix
	Dev      string
	Gw       netip.Addr
	Scope    Scope
	Type     RouteType
	Protocol uint8
}

// RouteKey is a route's identity: table and destination.
type RouteKey struct {
	Table int
	Dst   netip.Prefix
}

// Key returns the route's identity.
func (r Route) Key() RouteKey { return RouteKey{Table: r.Table, Dst: r.Dst} }

// Canonical returns the route in the form the kernel reports it: masked
// destination, table 0 as main, type 0 as unicast, no device or gateway on a
// throw route, and universe scope for IPv6 (the kernel keeps no IPv6 scope).
func (r Route) Canonical() Route {
	r.Dst = r.Dst.Masked()
	r.Gw = r.Gw.Unmap()
	if r.Table == 0 {
		r.Table = MainTable
	}
	if r.Type == 0 {
		r.Type = RouteUnicast
	}
	if r.Type == RouteThrow {
		r.Dev, r.Gw = "", netip.Addr{}
	}
	if r.Dst.Addr().Is6() {
		r.Scope = ScopeUniverse
	}
	return r
}

func (r Route) String() string {
	s := fmt.Sprintf("%s table %d", r.Dst, r.Table)
	if r.Type == RouteThrow {
		s = "throw " + s
	}
	if r.Gw.IsValid() {
		s += " via " + r.Gw.String()
	}
	if r.Dev != "" {
		s += " dev " + r.Dev
	}
	return s
}

// Rule is one policy-routing rule that looks up Table. Mark and Mask select
// on the firewall mark; Mask 0 with a non-zero Mark means an exact match.
// An invalid Src means "from all".
type Rule struct {
	Priority int
	Table    int
	Src      netip.Prefix
	Mark     uint32
	Mask     uint32
	Family   family.Family
}

// Canonical returns the rule as the kernel reports it.
func (r Rule) Canonical() Rule {
	if r.Src.IsValid() {
		r.Src = r.Src.Masked()
		r.Family = family.Of(r.Src.Addr())
		if r.Src.Bits() == 0 {
			r.Src = netip.Prefix{}
		}
	}
	if r.Family == "" {
		r.Family = family.IPv4
	}
	if r.Mark != 0 && r.Mask == 0 {
		r.Mask = ^uint32(0)
	}
	return r
}

func (r Rule) String() string {
	from := "all"
	if r.Src.IsValid() {
		from = r.Src.String()
	}
	s := fmt.Sprintf("rule %d ipv%d from %s", r.Priority, r.Family.Version(), from)
	if r.Mark != 0 || r.Mask != 0 {
		s += fmt.Sprintf(" fwmark %#x/%#x", r.Mark, r.Mask)
	}
	return s + fmt.Sprintf(" lookup %d", r.Table)
}

// Neigh is a neighbour entry: a permanent IP -> MAC entry, or (Proxy) an
// address the device answers neighbour requests for.
type Neigh struct {
	Dev       string
	IP        netip.Addr
	MAC       MAC
	Proxy     bool
	Permanent bool
}

// NeighKey is a neighbour entry's identity.
type NeighKey struct {
	Dev   string
	IP    netip.Addr
	Proxy bool
}

// Key returns the entry's identity.
func (n Neigh) Key() NeighKey { return NeighKey{Dev: n.Dev, IP: n.IP, Proxy: n.Proxy} }

// Canonical returns the entry as the kernel reports it: a proxy entry has no
// MAC and no state.
func (n Neigh) Canonical() Neigh {
	n.IP = n.IP.Unmap()
	if n.Proxy {
		n.MAC, n.Permanent = MAC{}, false
	}
	return n
}

func (n Neigh) String() string {
	if n.Proxy {
		return fmt.Sprintf("proxy neighbour %s dev %s", n.IP, n.Dev)
	}
	return fmt.Sprintf("neighbour %s lladdr %s dev %s", n.IP, n.MAC, n.Dev)
}

// FDB is a forwarding-database entry on a VXLAN device: frames for MAC go to
// the VTEP Dst. The all-zero MAC is the flood group: one entry per remote.
type FDB struct {
	Dev string
	MAC MAC
	Dst netip.Addr
}

// FDBKey is an FDB entry's identity. A unicast MAC has one destination, so
// its key omits Dst; the all-zero and multicast MACs hold one entry per Dst.
type FDBKey struct {
	Dev string
	MAC MAC
	Dst netip.Addr
}

// Key returns the entry's identity.
func (e FDB) Key() FDBKey {
	k := FDBKey{Dev: e.Dev, MAC: e.MAC}
	if e.MAC.IsZero() || e.MAC.IsMulticast() {
		k.Dst = e.Dst
	}
	return k
}

// Canonical returns the entry with an unmapped destination.
func (e FDB) Canonical() FDB {
	e.Dst = e.Dst.Unmap()
	return e
}

func (e FDB) String() string {
	return fmt.Sprintf("fdb %s dst %s dev %s", e.MAC, e.Dst, e.Dev)
}

// Addr is an address on a link. Prefix carries the address and its length.
type Addr struct {
	Dev           string
	Prefix        netip.Prefix
	Scope         Scope
	NoPrefixRoute bool
}

// AddrKey is an address's identity.
type AddrKey struct {
	Dev    string
	Prefix netip.Prefix
}

// Key returns the address's identity.
func (a Addr) Key() AddrKey { return AddrKey{Dev: a.Dev, Prefix: a.Prefix} }

// Canonical returns the address with an unmapped IP.
func (a Addr) Canonical() Addr {
	if a.Prefix.IsValid() {
		a.Prefix = netip.PrefixFrom(a.Prefix.Addr().Unmap(), a.Prefix.Bits())
	}
	return a
}

func (a Addr) String() string {
	s := fmt.Sprintf("address %s dev %s scope %d", a.Prefix, a.Dev, a.Scope)
	if a.NoPrefixRoute {
		s += " noprefixroute"
	}
	return s
}

// State is a set of kernel objects. Order carries no meaning.
//
// Absent, in a desired state, lists routes that must not exist whoever owns
// them: the kernel's `local` route of an address (table local) that the
// node must not take as its own (the underlay's enhanced addresses). Diff
// deletes such a route where the kernel has it, and right after the address
// where the plan adds the address, since the kernel makes the route with
// it. A route is matched by table, destination, device and type.
//
// Links, in a state read from the kernel, maps the name of each link that
// exists to its index. Diff
// ignores it: links are made and removed by their owners' ensure functions,
// not by plans. Neither Absent nor Links is counted by Len.
type State struct {
	Routes []Route
	Rules  []Rule
	Neighs []Neigh
	FDB    []FDB
	Addrs  []Addr
	Absent []Route
	Links  map[string]int
}

// Len returns the number of objects in the state.
func (s State) Len() int {
	return len(s.Routes) + len(s.Rules) + len(s.Neighs) + len(s.FDB) + len(s.Addrs)
}

func comparePrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	default:
		return 1
	}
}

func compareRoute(a, b Route) int {
	return cmp.Or(cmp.Compare(a.Table, b.Table), comparePrefix(a.Dst, b.Dst),
		cmp.Compare(a.Dev, b.Dev), a.Gw.Compare(b.Gw), cmp.Compare(a.Scope, b.Scope),
		cmp.Compare(a.Type, b.Type), cmp.Compare(a.Protocol, b.Protocol))
}

func compareRule(a, b Rule) int {
	return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.Family, b.Family),
		comparePrefix(a.Src, b.Src), cmp.Compare(a.Mark, b.Mark), cmp.Compare(a.Mask, b.Mask),
		cmp.Compare(a.Table, b.Table))
}

func compareNeigh(a, b Neigh) int {
	return cmp.Or(cmp.Compare(a.Dev, b.Dev), a.IP.Compare(b.IP), compareBool(a.Proxy, b.Proxy),
		a.MAC.Compare(b.MAC), compareBool(a.Permanent, b.Permanent))
}

func compareFDB(a, b FDB) int {
	return cmp.Or(cmp.Compare(a.Dev, b.Dev), a.MAC.Compare(b.MAC), a.Dst.Compare(b.Dst))
}

func compareAddr(a, b Addr) int {
	return cmp.Or(cmp.Compare(a.Dev, b.Dev), comparePrefix(a.Prefix, b.Prefix),
		cmp.Compare(a.Scope, b.Scope), compareBool(a.NoPrefixRoute, b.NoPrefixRoute))
}
