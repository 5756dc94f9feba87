package desired

import (
	"slices"
	"strings"
)

// ProtocolEstuary is the route protocol number (rtm_protocol) estuary writes
// on its routes: 0xE5 (229), unused by iproute2's rt_protos. A route carrying
// it is estuary's in any table.
const ProtocolEstuary uint8 = 0xE5

// Ownership says which kernel objects estuary manages. Diff deletes only
// owned objects that are not desired and never touches anything else.
//
//   - a route is owned if it carries Protocol or lives in a table in
//     [TableMin, TableMax];
//   - a rule is owned if its priority is in [PriorityMin, PriorityMax];
//   - a neighbour entry is owned if it is permanent or a proxy entry on an
//     owned device (dynamic entries are the kernel's cache, not state);
//   - an FDB entry is owned if it is on an owned device;
//   - an address is owned if it carries estuary's mark: scope link and
//     noprefixroute (the "enhanced address" of architecture.md). The kernel
//     keeps no other per-address owner, and estuary writes no other kind.
//
// A device is owned if its name starts with DevicePrefix or is in Devices.
//
// Three fields narrow the rules above for a reconcile that manages only part
// of estuary's state beside another part (the overlay beside the pod
// plumbing): RoutesByTable makes a route owned only by its table, whatever
// its protocol, NoAddrs makes no address owned, and Skip makes nothing on
// the devices it names owned (a device another party is writing at that
// moment, such as the host veth of a pod being added). Owner names the
// writer (the routing plan, routing.go) in errors; "" is estuary as a
// whole.
type Ownership struct {
	Owner         Owner
	Protocol      uint8
	TableMin      int
	TableMax      int
	PriorityMin   int
	PriorityMax   int
	DevicePrefix  string
	Devices       []string
	RoutesByTable bool
	NoAddrs       bool
	Skip          func(dev string) bool
	// Neighs and Addrs, when set, decide alone which neighbour entries and
	// which addresses are owned (Skip still applies): the underlay's depend
	// on its input.
	Neighs func(Neigh) bool
	Addrs  func(Addr) bool
}

// DefaultOwnership is estuary's ownership: protocol 0xE5, tables and rule
// priorities 1000-1999 (the routing plan, routing.go) and
// devices named DevicePrefix*.
func DefaultOwnership() Ownership {
	return Ownership{
		Protocol:     ProtocolEstuary,
		TableMin:     TableLocalPods,
		TableMax:     TableUnderlayLast,
		PriorityMin:  PriorityLocalPods,
		PriorityMax:  TableUnderlayLast,
		DevicePrefix: DevicePrefix,
	}
}

// OwnsDevice reports whether the named link is estuary's.
func (o Ownership) OwnsDevice(name string) bool {
	if name == "" {
		return false
	}
	if o.DevicePrefix != "" && strings.HasPrefix(name, o.DevicePrefix) {
		return true
	}
	return slices.Contains(o.Devices, name)
}

// skips reports whether the objects on dev are left alone in this pass.
func (o Ownership) skips(dev string) bool { return o.Skip != nil && dev != "" && o.Skip(dev) }

// OwnsNeighs reports whether o may own any neighbour entry.
func (o Ownership) OwnsNeighs() bool {
	return o.Neighs != nil || o.DevicePrefix != "" || len(o.Devices) > 0
}

// OwnsRoute reports whether r is estuary's.
func (o Ownership) OwnsRoute(r Route) bool {
	if o.skips(r.Dev) {
		return false
	}
	inTables := r.Table >= o.TableMin && r.Table <= o.TableMax
	if o.RoutesByTable {
		return inTables
	}
	return r.Protocol == o.Protocol || inTables
}

// OwnsRule reports whether r is estuary's.
func (o Ownership) OwnsRule(r Rule) bool {
	return r.Priority >= o.PriorityMin && r.Priority <= o.PriorityMax
}

// OwnsNeigh reports whether n is estuary's.
func (o Ownership) OwnsNeigh(n Neigh) bool {
	if o.skips(n.Dev) {
		return false
	}
	if o.Neighs != nil {
		return o.Neighs(n)
	}
	return (n.Proxy || n.Permanent) && o.OwnsDevice(n.Dev)
}

// OwnsFDB reports whether e is estuary's.
func (o Ownership) OwnsFDB(e FDB) bool { return o.OwnsDevice(e.Dev) && !o.skips(e.Dev) }

// OwnsAddr reports whether a carries estuary's mark (and o owns addresses).
func (o Ownership) OwnsAddr(a Addr) bool {
	if o.NoAddrs || o.skips(a.Dev) {
		return false
	}
	if o.Addrs != nil {
		return o.Addrs(a)
	}
	return a.Scope == ScopeLink && a.NoPrefixRoute
}

// Unowned returns the objects of s that o does not own.
func (o Ownership) Unowned(s State) State {
	return State{
		Routes: filter(s.Routes, func(r Route) bool { return !o.OwnsRoute(r) }),
		Rules:  filter(s.Rules, func(r Rule) bool { return !o.OwnsRule(r) }),
		Neighs: filter(s.Neighs, func(n Neigh) bool { return !o.OwnsNeigh(n) }),
		FDB:    filter(s.FDB, func(e FDB) bool { return !o.OwnsFDB(e) }),
		Addrs:  filter(s.Addrs, func(a Addr) bool { return !o.OwnsAddr(a) }),
	}
}

func filter[T any](in []T, keep func(T) bool) []T {
	var out []T
	for _, v := range in {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}
