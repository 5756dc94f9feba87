package desired

import (
	"fmt"
	"slices"
	"strings"
)

// Plan is the difference between desired and actual state. It is carried
// out in the order Steps gives, which every writer shares: addresses first
// (routes may need them), then routes, neighbours and FDB, then rules, so a
// rule never points at a table that is still empty; deletes run the other
// way round, rules first, so traffic stops being steered into a table
// before the table is emptied. Adds are "replace" writes: a route,
// neighbour, FDB entry or address with the key of an existing one
// overwrites it. See Steps for the three exceptions.
type Plan struct {
	AddAddrs  []Addr
	AddRoutes []Route
	AddNeighs []Neigh
	AddFDB    []FDB
	AddRules  []Rule

	DelRules  []Rule
	DelRoutes []Route
	DelNeighs []Neigh
	DelFDB    []FDB
	DelAddrs  []Addr
}

// Len returns the number of operations in the plan.
func (p Plan) Len() int {
	return len(p.AddAddrs) + len(p.AddRoutes) + len(p.AddNeighs) + len(p.AddFDB) + len(p.AddRules) +
		len(p.DelRules) + len(p.DelRoutes) + len(p.DelNeighs) + len(p.DelFDB) + len(p.DelAddrs)
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return p.Len() == 0 }

// String lists the plan's operations, one a line, in apply order.
func (p Plan) String() string {
	var b strings.Builder
	for _, st := range p.Steps() {
		op := "add"
		if st.Del {
			op = "del"
		}
		fmt.Fprintf(&b, "%s %s\n", op, st.Object)
	}
	return b.String()
}

// Diff computes the plan that takes actual to desired under DefaultOwnership.
func Diff(desired, actual State) Plan { return DefaultOwnership().Diff(desired, actual) }

// Diff computes the plan that takes actual to desired: every desired object
// that the kernel does not hold exactly is added (replacing whatever has its
// key), and every owned object whose key is not desired is deleted. Unowned
// objects are never deleted. Desired routes with Protocol 0 get o.Protocol.
// Routes in desired.Absent are deleted as State describes. The result is
// sorted, so equal inputs give equal plans.
func (o Ownership) Diff(desired, actual State) Plan {
	var p Plan
	p.AddRoutes, p.DelRoutes = diffKind(o.desiredRoutes(desired.Routes), actual.Routes,
		Route.Canonical, Route.Key, o.OwnsRoute, compareRoute)
	p.AddRules, p.DelRules = diffKind(desired.Rules, actual.Rules,
		Rule.Canonical, Rule.Canonical, o.OwnsRule, compareRule)
	p.AddNeighs, p.DelNeighs = diffKind(desired.Neighs, actual.Neighs,
		Neigh.Canonical, Neigh.Key, o.OwnsNeigh, compareNeigh)
	p.AddFDB, p.DelFDB = diffKind(desired.FDB, actual.FDB,
		FDB.Canonical, FDB.Key, o.OwnsFDB, compareFDB)
	p.AddAddrs, p.DelAddrs = diffKind(desired.Addrs, actual.Addrs,
		Addr.Canonical, Addr.Key, o.OwnsAddr, compareAddr)
	if len(desired.Absent) > 0 {
		p.DelRoutes = append(p.DelRoutes, absent(desired.Absent, actual.Routes, p.AddAddrs)...)
		slices.SortFunc(p.DelRoutes, compareRoute)
		p.DelRoutes = slices.Compact(p.DelRoutes)
	}
	return p
}

// absent returns the routes of want that must be deleted: the kernel's
// own copy where it has one, else want's where adding picks out an address
// whose local route it is (the kernel makes that route with the address).
func absent(want, actual []Route, adding []Addr) []Route {
	var out []Route
	for _, w := range want {
		found := false
		for _, r := range actual {
			if sameRoute(r, w) {
				out = append(out, r.Canonical())
				found = true
			}
		}
		if !found && slices.ContainsFunc(adding, func(a Addr) bool { return sameRoute(LocalRouteOf(a), w) }) {
			out = append(out, w.Canonical())
		}
	}
	return out
}

// sameRoute matches routes by table, destination, device and type.
func sameRoute(a, b Route) bool {
	a, b = a.Canonical(), b.Canonical()
	return a.Table == b.Table && a.Dst == b.Dst && a.Dev == b.Dev && a.Type == b.Type
}

func (o Ownership) desiredRoutes(rs []Route) []Route {
	out := make([]Route, len(rs))
	for i, r := range rs {
		if r.Protocol == 0 {
			r.Protocol = o.Protocol
		}
		out[i] = r
	}
	return out
}

// diffKind diffs one kind of object. Desired values are canonicalised and,
// when two share a key, the smallest in sort order wins. An actual value is
// kept when it equals the desired value for its key; it is deleted when it is
// owned and its key is not desired at all (a desired key with a different
// value is overwritten by the add instead).
func diffKind[V comparable, K comparable](desired, actual []V, canon func(V) V, key func(V) K,
	owned func(V) bool, compare func(V, V) int) (add, del []V) {
	want := make([]V, 0, len(desired))
	for _, v := range desired {
		want = append(want, canon(v))
	}
	slices.SortFunc(want, compare)
	index := make(map[K]int, len(want))
	uniq := want[:0]
	for _, v := range want {
		k := key(v)
		if _, dup := index[k]; !dup {
			index[k] = len(uniq)
			uniq = append(uniq, v)
		}
	}
	present := make([]bool, len(uniq))
	for _, v := range actual {
		v = canon(v)
		if i, ok := index[key(v)]; ok {
			present[i] = present[i] || uniq[i] == v
		} else if owned(v) {
			del = append(del, v)
		}
	}
	for i, v := range uniq {
		if !present[i] {
			add = append(add, v)
		}
	}
	slices.SortFunc(del, compare)
	return add, slices.Compact(del)
}
