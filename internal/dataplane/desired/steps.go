package desired

import (
	"fmt"
	"net/netip"
	"slices"
)

// Step is one operation of a plan: Object (a Route, Rule, Neigh, FDB or
// Addr) added, or deleted when Del.
type Step struct {
	Del    bool
	Object fmt.Stringer
}

// Steps returns the plan's operations in the order they are carried out:
//
//  1. deleted addresses that a new address of the plan replaces (same
//     device, overlapping subnets): a new address in the subnet of an old
//     one would be added as its secondary, and deleting the old primary
//     deletes its secondaries;
//  2. added addresses;
//  3. deleted routes of the local table (State.Absent: the kernel's local
//     route of an address just added, so the node takes that address as
//     its own for two netlink calls at most);
//  4. added routes without a gateway, then with one: the kernel accepts a
//     gateway only if a route makes it on-link, and that route may be in
//     the same plan;
//  5. added neighbours, FDB entries, then rules;
//  6. deleted rules, routes, neighbours, FDB entries, then the other
//     deleted addresses.
//
// Within each group the plan's (sorted) order is kept.
func (p Plan) Steps() []Step {
	out := make([]Step, 0, p.Len())
	replaced := func(a Addr) bool { return slices.ContainsFunc(p.AddAddrs, func(n Addr) bool { return replaces(n, a) }) }
	localTable := func(r Route) bool { return r.Table == LocalTable }
	onLink := func(r Route) bool { return !r.Gw.IsValid() }
	out = appendSteps(out, true, p.DelAddrs, replaced)
	out = appendSteps(out, false, p.AddAddrs, nil)
	out = appendSteps(out, true, p.DelRoutes, localTable)
	out = appendSteps(out, false, p.AddRoutes, onLink)
	out = appendSteps(out, false, p.AddRoutes, not(onLink))
	out = appendSteps(out, false, p.AddNeighs, nil)
	out = appendSteps(out, false, p.AddFDB, nil)
	out = appendSteps(out, false, p.AddRules, nil)
	out = appendSteps(out, true, p.DelRules, nil)
	out = appendSteps(out, true, p.DelRoutes, not(localTable))
	out = appendSteps(out, true, p.DelNeighs, nil)
	out = appendSteps(out, true, p.DelFDB, nil)
	out = appendSteps(out, true, p.DelAddrs, not(replaced))
	return out
}

// replaces reports whether adding n makes deleting old urgent: same device,
// overlapping subnets.
func replaces(n, old Addr) bool {
	return n.Dev == old.Dev && overlaps(n.Prefix, old.Prefix)
}

func overlaps(a, b netip.Prefix) bool {
	a, b = netip.PrefixFrom(a.Addr().Unmap(), a.Bits()).Masked(), netip.PrefixFrom(b.Addr().Unmap(), b.Bits()).Masked()
	return a.Overlaps(b)
}

func not[T any](f func(T) bool) func(T) bool { return func(v T) bool { return !f(v) } }

// appendSteps appends the values of vs that keep selects (all if nil).
func appendSteps[T fmt.Stringer](out []Step, del bool, vs []T, keep func(T) bool) []Step {
	for _, v := range vs {
		if keep == nil || keep(v) {
			out = append(out, Step{Del: del, Object: v})
		}
	}
	return out
}
