package desired

import (
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
)

// gen draws objects from a small universe so that keys collide often.
type gen struct{ r *rand.Rand }

func (g gen) pick(n int) int { return g.r.IntN(n) }

func (g gen) dev() string { return []string{"est1", "est2", "estvx", "eth0", "vx0"}[g.pick(5)] }

func (g gen) addr() netip.Addr {
	if g.pick(3) == 0 {
		return netip.AddrFrom16([16]byte{0: 0xfd, 15: byte(g.pick(6))})
	}
	return netip.AddrFrom4([4]byte{10, 0, 0, byte(g.pick(6))})
}

func (g gen) mac() MAC {
	if g.pick(3) == 0 {
		return MAC{}
	}
	return MAC{2, 0, 0, 0, 0, byte(g.pick(3))}
}

func (g gen) route() Route {
	a := g.addr()
	r := Route{Table: []int{MainTable, 1000, 1001, 1100, 100}[g.pick(5)], Dst: netip.PrefixFrom(a, a.BitLen()),
		Dev: g.dev(), Protocol: []uint8{ProtocolEstuary, 3, 4}[g.pick(3)], Scope: Scope(g.pick(2) * int(ScopeLink))}
	if g.pick(4) == 0 {
		r.Type = RouteThrow
	}
	return r
}

func (g gen) rule() Rule {
	r := Rule{Priority: []int{100, 1000, 1001, 1100, 32766}[g.pick(5)], Table: 1000 + g.pick(3)}
	if g.pick(2) == 0 {
		a := g.addr()
		r.Src = netip.PrefixFrom(a, a.BitLen()-8)
	}
	if g.pick(2) == 0 {
		r.Mark, r.Mask = uint32(g.pick(2))*0x20, 0x20
	}
	return r
}

func (g gen) neigh() Neigh {
	return Neigh{Dev: g.dev(), IP: g.addr(), MAC: g.mac(), Proxy: g.pick(2) == 0, Permanent: g.pick(3) != 0}
}

func (g gen) fdb() FDB { return FDB{Dev: g.dev(), MAC: g.mac(), Dst: g.addr()} }

func (g gen) addrObj() Addr {
	a := g.addr()
	return Addr{Dev: g.dev(), Prefix: netip.PrefixFrom(a, 24+g.pick(2)*8), Scope: Scope(g.pick(2) * int(ScopeLink)),
		NoPrefixRoute: g.pick(2) == 0}
}

func (g gen) state(n int) State {
	var s State
	for range n {
		s.Routes = append(s.Routes, g.route())
		s.Rules = append(s.Rules, g.rule())
		s.Neighs = append(s.Neighs, g.neigh())
		s.FDB = append(s.FDB, g.fdb())
		s.Addrs = append(s.Addrs, g.addrObj())
	}
	return s
}

// kernelModel is a pure model of the kernel: one object per key.
type kernelModel struct {
	routes map[RouteKey]Route
	rules  map[Rule]Rule
	neighs map[NeighKey]Neigh
	fdb    map[FDBKey]FDB
	addrs  map[AddrKey]Addr
}

func modelOf(s State) kernelModel {
	return kernelModel{
		routes: index(s.Routes, Route.Canonical, Route.Key),
		rules:  index(s.Rules, Rule.Canonical, Rule.Canonical),
		neighs: index(s.Neighs, Neigh.Canonical, Neigh.Key),
		fdb:    index(s.FDB, FDB.Canonical, FDB.Key),
		addrs:  index(s.Addrs, Addr.Canonical, Addr.Key),
	}
}

func index[V any, K comparable](vs []V, canon func(V) V, key func(V) K) map[K]V {
	m := make(map[K]V, len(vs))
	for _, v := range vs {
		v = canon(v)
		m[key(v)] = v
	}
	return m
}

func (m kernelModel) apply(p Plan) {
	put(m.addrs, p.AddAddrs, Addr.Key)
	put(m.routes, p.AddRoutes, Route.Key)
	put(m.neighs, p.AddNeighs, Neigh.Key)
	put(m.fdb, p.AddFDB, FDB.Key)
	put(m.rules, p.AddRules, Rule.Canonical)
	del(m.rules, p.DelRules, Rule.Canonical)
	del(m.routes, p.DelRoutes, Route.Key)
	del(m.neighs, p.DelNeighs, Neigh.Key)
	del(m.fdb, p.DelFDB, FDB.Key)
	del(m.addrs, p.DelAddrs, Addr.Key)
}

func put[V any, K comparable](m map[K]V, vs []V, key func(V) K) {
	for _, v := range vs {
		m[key(v)] = v
	}
}

// del removes an object only if the kernel holds exactly it, as netlink
// deletes match on the attributes given.
func del[V comparable, K comparable](m map[K]V, vs []V, key func(V) K) {
	for _, v := range vs {
		if m[key(v)] == v {
			delete(m, key(v))
		}
	}
}

func (m kernelModel) state() State {
	s := State{}
	for _, v := range m.routes {
		s.Routes = append(s.Routes, v)
	}
	for _, v := range m.rules {
		s.Rules = append(s.Rules, v)
	}
	for _, v := range m.neighs {
		s.Neighs = append(s.Neighs, v)
	}
	for _, v := range m.fdb {
		s.FDB = append(s.FDB, v)
	}
	for _, v := range m.addrs {
		s.Addrs = append(s.Addrs, v)
	}
	return s
}

// expected is desired ∪ the unowned part of actual whose key desired does not
// claim, all canonical.
func expected(o Ownership, desired, actual State) kernelModel {
	// Diff keeps the smallest desired value per key; index the canonical
	// values in descending order so that the smallest is written last.
	want := modelOf(sortedState(State{
		Routes: mapSlice(o.desiredRoutes(desired.Routes), Route.Canonical),
		Rules:  desired.Rules,
		Neighs: mapSlice(desired.Neighs, Neigh.Canonical),
		FDB:    mapSlice(desired.FDB, FDB.Canonical),
		Addrs:  mapSlice(desired.Addrs, Addr.Canonical),
	}))
	keep := modelOf(o.Unowned(actual))
	keepMissing(want.routes, keep.routes)
	keepMissing(want.rules, keep.rules)
	keepMissing(want.neighs, keep.neighs)
	keepMissing(want.fdb, keep.fdb)
	keepMissing(want.addrs, keep.addrs)
	return want
}

func mapSlice[V any](vs []V, f func(V) V) []V {
	out := make([]V, len(vs))
	for i, v := range vs {
		out[i] = f(v)
	}
	return out
}

func keepMissing[K comparable, V any](into, from map[K]V) {
	for k, v := range from {
		if _, ok := into[k]; !ok {
			into[k] = v
		}
	}
}

// sortedState sorts descending so that index() leaves the smallest per key.
func sortedState(s State) State {
	slices.SortFunc(s.Routes, func(a, b Route) int { return compareRoute(b, a) })
	slices.SortFunc(s.Neighs, func(a, b Neigh) int { return compareNeigh(b, a) })
	slices.SortFunc(s.FDB, func(a, b FDB) int { return compareFDB(b, a) })
	slices.SortFunc(s.Addrs, func(a, b Addr) int { return compareAddr(b, a) })
	return s
}

func sameModel(a, b kernelModel) bool {
	return maps.Equal(a.routes, b.routes) && maps.Equal(a.rules, b.rules) && maps.Equal(a.neighs, b.neighs) &&
		maps.Equal(a.fdb, b.fdb) && maps.Equal(a.addrs, b.addrs)
}

func FuzzDiff(f *testing.F) {
	f.Add(uint64(1), uint8(3), uint8(3))
	f.Add(uint64(2), uint8(0), uint8(10))
	f.Add(uint64(3), uint8(10), uint8(0))
	f.Add(uint64(42), uint8(20), uint8(20))
	f.Add(uint64(7), uint8(40), uint8(40))
	f.Fuzz(func(t *testing.T, seed uint64, nd, na uint8) {
		g := gen{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
		desired := g.state(int(nd % 64))
		actual := modelOf(g.state(int(na % 64))).state() // a kernel holds one object per key
		o := DefaultOwnership()
		plan := o.Diff(desired, actual)
		assertNoUnownedDeletes(t, o, plan)

		m := modelOf(actual)
		m.apply(plan)
		if want := expected(o, desired, actual); !sameModel(m, want) {
			t.Fatalf("applying plan:\n%s\ngives\n%+v\nwant\n%+v", plan, m.state(), want.state())
		}
		if again := o.Diff(desired, m.state()); !again.Empty() {
			t.Fatalf("second diff not empty:\n%s", again)
		}
	})
}

func assertNoUnownedDeletes(t *testing.T, o Ownership, p Plan) {
	t.Helper()
	for _, r := range p.DelRoutes {
		if !o.OwnsRoute(r) {
			t.Fatalf("deletes unowned %s", r)
		}
	}
	for _, r := range p.DelRules {
		if !o.OwnsRule(r) {
			t.Fatalf("deletes unowned %s", r)
		}
	}
	for _, n := range p.DelNeighs {
		if !o.OwnsNeigh(n) {
			t.Fatalf("deletes unowned %s", n)
		}
	}
	for _, e := range p.DelFDB {
		if !o.OwnsFDB(e) {
			t.Fatalf("deletes unowned %s", e)
		}
	}
	for _, a := range p.DelAddrs {
		if !o.OwnsAddr(a) {
			t.Fatalf("deletes unowned %s", a)
		}
	}
}
