package state

import (
	"fmt"
	"slices"
	"strings"
)

// Plan is the difference between desired and actual state. Apply it in field
// order: addresses first (routes may need them), then routes, neighbours and
// FDB, then rules, so a rule never points at a table that is still empty;
// deletes run the other way round, rules first, so traffic stops being steered
// into a table before the table is emptied. Adds are "replace" writes: a
// route, neighbour, FDB entry or address with the key of an existing one
// overwrites it.
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
	line := func(op string, v fmt.Stringer) { fmt.Fprintf(&b, "%s %s\n", op, v) }
	each(p.AddAddrs, "add", line)
	each(p.AddRoutes, "add", line)
	each(p.AddNeighs, "add", line)
	each(p.AddFDB, "add", line)
	each(p.AddRules, "add", line)
	each(p.DelRules, "del", line)
	each(p.DelRoutes, "del", line)
	each(p.DelNeighs, "del", line)
	each(p.DelFDB, "del", line)
	each(p.DelAddrs, "del", line)
	return b.String()
}

func each[T fmt.Stringer](vs []T, op string, f func(string, fmt.Stringer)) {
	for _, v := range vs {
		f(op, v)
	}
}

// Diff computes the plan that takes actual to desired under DefaultOwnership.
func Diff(desired, actual State) Plan { return DefaultOwnership().Diff(desired, actual) }

// Diff computes the plan that takes actual to desired: every desired object
// that the kernel does not hold exactly is added (replacing whatever has its
// key), and every owned object whose key is not desired is deleted. Unowned
// objects are never deleted. Desired routes with Protocol 0 get o.Protocol.
// The result is sorted, so equal inputs give equal plans.
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
	return p
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
