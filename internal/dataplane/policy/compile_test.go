package policy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/estuary-cni/estuary/pkg/family"
)

// admits runs a compiled ruleset on p as the kernel would run the chain
// the verdict map vmap gives veth: true when the chain returns.
func admits(t testing.TB, rs Ruleset, vmap, veth string, p Packet) bool {
	t.Helper()
	m := rs.Ingress
	if vmap == EgressMap {
		m = rs.Egress
	}
	name, ok := m[veth]
	if !ok {
		return true
	}
	sets := map[string]Set{}
	for _, s := range rs.Sets {
		sets[s.Name] = s
	}
	chains := map[string]Chain{}
	for _, c := range rs.Chains {
		chains[c.Name] = c
	}
	for hops := 0; hops < 3; hops++ {
		c, ok := chains[name]
		if !ok {
			t.Fatalf("chain %s is referenced but missing", name)
		}
		next := ""
		for _, r := range c.Rules {
			if r.Set != "" && r.Src != (vmap == IngressMap) {
				t.Fatalf("rule %s of %s matches the wrong address", r, name)
			}
			if r.Verdict == 0 || !ruleMatches(t, r, sets, p) {
				continue // a log rule decides nothing
			}
			switch r.Verdict {
			case Return:
				return true
			case Drop:
				return false
			case Goto:
				next = r.Goto
			}
			break
		}
		if next == "" {
			return true
		}
		name = next
	}
	t.Fatalf("gotos loop from %s", m[veth])
	return false
}

func ruleMatches(t testing.TB, r NFRule, sets map[string]Set, p Packet) bool {
	if r.Set != "" {
		s, ok := sets[r.Set]
		if !ok {
			t.Fatalf("rule %s: no set %s", r, r.Set)
		}
		if family.Of(p.Peer) != r.Family || s.Family != r.Family || !rangesContain(s.Ranges, p.Peer) {
			return false
		}
	}
	if r.Protocol != 0 && uint8(r.Protocol) != p.Protocol {
		return false
	}
	return r.From == 0 || (p.Port >= r.From && p.Port <= r.To)
}

// gen builds random models over a small address and port space, so that
// random packets hit the rules' edges.
type gen struct{ r *rand.Rand }

var genPrefixes = []string{"10.0.0.0/24", "10.0.0.0/25", "10.0.0.64/26", "10.0.0.5/32", "10.0.0.128/28",
	"0.0.0.0/0", "fd00::/120", "fd00::80/121", "fd00::5/128", "::/0"}

func (g gen) prefix() netip.Prefix {
	return netip.MustParsePrefix(genPrefixes[g.r.IntN(len(genPrefixes))])
}

func (g gen) rule(id string) Rule {
	r := Rule{ID: id}
	if g.r.IntN(6) == 0 {
		r.Peers.Any = true
	}
	for range g.r.IntN(3) {
		b := Block{CIDR: g.prefix()}
		for range g.r.IntN(3) {
			b.Except = append(b.Except, g.prefix())
		}
		r.Peers.Blocks = append(r.Peers.Blocks, b)
	}
	for range g.r.IntN(3) {
		p := Port{Protocol: []Protocol{TCP, UDP, SCTP}[g.r.IntN(3)]}
		if g.r.IntN(4) > 0 {
			p.From = uint16(1 + g.r.IntN(8))
			if g.r.IntN(2) == 0 {
				p.To = p.From + uint16(g.r.IntN(4))
			}
		}
		r.Ports = append(r.Ports, p)
	}
	return r
}

func (g gen) admin(id string, actions ...Action) []AdminRule {
	var out []AdminRule
	for i := range g.r.IntN(4) {
		out = append(out, AdminRule{g.rule(fmt.Sprintf("%s/%d", id, i)), actions[g.r.IntN(len(actions))]})
	}
	return out
}

func (g gen) direction(id string) Direction {
	d := Direction{Admin: g.admin(id+"/anp", Allow, Deny, Pass), Baseline: g.admin(id+"/banp", Allow, Deny)}
	if g.r.IntN(2) == 0 {
		d.Isolated = true
		for i := range g.r.IntN(3) {
			d.Allow = append(d.Allow, g.rule(fmt.Sprintf("%s/np/%d", id, i)))
		}
	}
	return d
}

func (g gen) packet() Packet {
	a := netip.AddrFrom4([4]byte{10, 0, 0, byte(g.r.IntN(256))})
	if g.r.IntN(3) == 0 {
		a = netip.AddrFrom16([16]byte{0: 0xfd, 15: byte(g.r.IntN(256))})
	}
	return Packet{Peer: a, Protocol: []uint8{1, 6, 17, 132}[g.r.IntN(4)], Port: uint16(g.r.IntN(12))}
}

// FuzzCompile: for random models, the compiled ruleset decides every
// random packet as Decide does, compiling twice gives the same ruleset,
// and the ruleset read back diffs to nothing.
func FuzzCompile(f *testing.F) {
	for _, s := range []uint64{1, 2, 3, 42, 1 << 40} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		g := gen{rand.New(rand.NewPCG(seed, seed>>7))}
		var n Node
		for i := range 1 + g.r.IntN(3) {
			n.Endpoints = append(n.Endpoints, Endpoint{HostVeth: fmt.Sprintf("est%d", i),
				Ingress: g.direction(fmt.Sprintf("%d/in", i)), Egress: g.direction(fmt.Sprintf("%d/out", i))})
		}
		rs, err := Compile(n)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range n.Endpoints {
			for range 64 {
				p := g.packet()
				if got, want := admits(t, rs, IngressMap, e.HostVeth, p), e.Ingress.Decide(p); got != want {
					t.Fatalf("ingress of %s, %+v: compiled %v, Decide %v\nmodel %+v\nchains %v", e.HostVeth, p, got, want, e.Ingress, rs.Chains)
				}
				if got, want := admits(t, rs, EgressMap, e.HostVeth, p), e.Egress.Decide(p); got != want {
					t.Fatalf("egress of %s, %+v: compiled %v, Decide %v\nmodel %+v\nchains %v", e.HostVeth, p, got, want, e.Egress, rs.Chains)
				}
			}
		}
		again, _ := Compile(n)
		if !reflect.DeepEqual(rs, again) {
			t.Fatal("two compiles of one model differ")
		}
		if o := Diff(rs, readBack(rs)); !o.Empty() {
			t.Fatalf("diff against itself:\n%s", o)
		}
	})
}

// readBack is the Table the kernel holds after rs was written.
func readBack(rs Ruleset) Table {
	t := Table{Present: true, Skeleton: true, Shape: rs.Skeleton, Sets: map[string]Set{}, Chains: map[string][]string{},
		Ingress: map[string]string{}, Egress: map[string]string{}, Counters: map[string]bool{}}
	for _, s := range rs.Sets {
		t.Sets[s.Name] = s
	}
	for _, c := range rs.Counters {
		t.Counters[c.Name] = true
	}
	for _, c := range rs.Chains {
		t.Chains[c.Name] = tags(c.Rules)
	}
	for k, v := range rs.Ingress {
		t.Ingress[k] = v
	}
	for k, v := range rs.Egress {
		t.Egress[k] = v
	}
	return t
}

func tags(rs []NFRule) []string {
	out := []string{}
	for _, r := range rs {
		out = append(out, r.String())
	}
	return out
}

// apply plays o on t in the order the ops layer sends it.
func apply(t Table, o Ops) Table {
	if o.Create {
		t = readBack(Ruleset{})
	}
	for _, s := range slices.Concat(o.AddSets, o.RefillSets) {
		t.Sets[s.Name] = s
	}
	for _, c := range slices.Concat(o.AddChains, o.RefillChains) {
		t.Chains[c.Name] = tags(c.Rules)
	}
	for _, e := range o.DelMap {
		delete(map[string]map[string]string{IngressMap: t.Ingress, EgressMap: t.Egress}[e.Map], e.Veth)
	}
	for _, e := range o.AddMap {
		map[string]map[string]string{IngressMap: t.Ingress, EgressMap: t.Egress}[e.Map][e.Veth] = e.Chain
	}
	for _, c := range o.DelChains {
		delete(t.Chains, c)
	}
	for _, s := range o.DelSets {
		delete(t.Sets, s)
	}
	for _, c := range o.AddCounters {
		t.Counters[c] = true
	}
	for _, c := range o.DelCounters {
		delete(t.Counters, c)
	}
	return t
}

// FuzzDiff: from any compiled ruleset to any other, the ops turn the one
// table into the other, and touch only what differs.
func FuzzDiff(f *testing.F) {
	f.Add(uint64(1), uint64(2))
	f.Add(uint64(7), uint64(7))
	f.Fuzz(func(t *testing.T, a, b uint64) {
		from, to := randomRuleset(t, a), randomRuleset(t, b)
		o := Diff(to, readBack(from))
		got := apply(readBack(from), o)
		if want := readBack(to); !reflect.DeepEqual(normal(got), normal(want)) {
			t.Fatalf("ops\n%s\ngive %+v\nwant %+v", o, got, want)
		}
		if a == b && !o.Empty() {
			t.Fatalf("same ruleset, ops\n%s", o)
		}
	})
}

func normal(t Table) Table {
	for k, s := range t.Sets {
		if s.Ranges == nil {
			s.Ranges = []family.Range{}
		}
		t.Sets[k] = s
	}
	return t
}

func randomRuleset(t *testing.T, seed uint64) Ruleset {
	g := gen{rand.New(rand.NewPCG(seed, 3))}
	var n Node
	for i := range g.r.IntN(4) {
		n.Endpoints = append(n.Endpoints, Endpoint{HostVeth: fmt.Sprintf("est%d", g.r.IntN(4)*10+i),
			Ingress: g.direction(fmt.Sprintf("%d/in", i)), Egress: g.direction(fmt.Sprintf("%d/out", i))})
	}
	rs, err := Compile(n)
	if err != nil {
		t.Skip("model not compilable (one ID, two peer sets)")
	}
	return rs
}

func TestDiffTouchesOnlyChangedSet(t *testing.T) {
	mk := func(peer string) Ruleset {
		r := Rule{ID: "np/a", Peers: peers(peer), Ports: []Port{tcp80}}
		rs, err := Compile(Node{Endpoints: []Endpoint{
			{HostVeth: "esta", Ingress: Direction{Isolated: true, Allow: []Rule{r}}},
			{HostVeth: "estb", Ingress: Direction{Isolated: true, Allow: []Rule{r}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	o := Diff(mk("10.0.0.2/32"), readBack(mk("10.0.0.1/32")))
	if len(o.RefillSets) != 1 || len(o.RefillChains)+len(o.AddChains)+len(o.DelChains)+len(o.AddMap)+len(o.DelMap) != 0 || o.Create {
		t.Errorf("a peer change should refill one set and nothing else:\n%s", o)
	}
	if o := Diff(mk("10.0.0.1/32"), Table{}); !o.Create || o.Delete || len(o.AddChains) != 2 || len(o.AddMap) != 2 {
		t.Errorf("missing table: %s", o)
	}
	if o := Diff(mk("10.0.0.1/32"), Table{Present: true}); !o.Create || !o.Delete {
		t.Errorf("foreign skeleton: %s", o)
	}
}
