package policy

import (
	"maps"
	"slices"
	"strings"
)

// Table is estuary's policy table as the ops layer reads it back.
type Table struct {
	// Present says the table exists; Skeleton, that its base chains and
	// verdict maps are exactly those estuary writes (nothing else there),
	// in the shape Shape.
	Present, Skeleton bool
	Shape             Skeleton
	// Sets by name.
	Sets map[string]Set
	// Chains holds each regular chain's rules, as their tags (NFRule.String),
	// in order.
	Chains map[string][]string
	// Ingress and Egress are the verdict maps' entries: host veth -> chain.
	Ingress, Egress map[string]string
	// Counters are the names of the table's named counters.
	Counters map[string]bool
}

// MapEntry is an entry of the verdict map Map (IngressMap or EgressMap).
type MapEntry struct {
	Map, Veth, Chain string
}

// Ops are the changes that make a Table hold a Ruleset, to be sent in one
// batch in this order: create the table and skeleton (Create, after
// deleting it when Delete), add counters, add sets and chains (chains
// empty first, so that gotos between new chains resolve), refill sets and
// chains, delete map entries, add map entries, delete chains (flushed
// first), delete sets, delete counters.
type Ops struct {
	Delete, Create bool
	AddSets        []Set
	RefillSets     []Set
	AddChains      []Chain
	RefillChains   []Chain
	DelMap         []MapEntry
	AddMap         []MapEntry
	DelChains      []string
	DelSets        []string
	// AddCounters are added before the chains that count into them;
	// DelCounters deleted after the last chain that did (verdicts.go).
	AddCounters, DelCounters []string

	// Skeleton is the shape Create writes.
	Skeleton Skeleton
}

// Empty says there is nothing to do.
func (o Ops) Empty() bool {
	return !o.Delete && !o.Create && len(o.AddSets)+len(o.RefillSets)+len(o.AddChains)+
		len(o.RefillChains)+len(o.DelMap)+len(o.AddMap)+len(o.DelChains)+len(o.DelSets)+
		len(o.AddCounters)+len(o.DelCounters) == 0
}

// Diff computes the operations that turn have into want. A table missing,
// or whose skeleton is not estuary's or of another shape than want's, is
// recreated whole.
func Diff(want Ruleset, have Table) Ops {
	if !have.Present || !have.Skeleton || have.Shape != want.Skeleton {
		o := Ops{Delete: have.Present, Create: true, Skeleton: want.Skeleton, AddSets: want.Sets, AddChains: want.Chains}
		o.AddMap = append(entries(IngressMap, want.Ingress, nil), entries(EgressMap, want.Egress, nil)...)
		o.AddCounters = counterNames(want.Counters, nil)
		return o
	}
	var o Ops
	o.AddCounters = counterNames(want.Counters, have.Counters)
	o.DelCounters = staleCounters(want.Counters, have.Counters)
	wantSets := map[string]bool{}
	for _, s := range want.Sets {
		wantSets[s.Name] = true
		h, ok := have.Sets[s.Name]
		switch {
		case !ok:
			o.AddSets = append(o.AddSets, s)
		case h.Family != s.Family:
			return Diff(want, Table{Present: true}) // a set cannot change its key type
		case !slices.Equal(h.Ranges, s.Ranges):
			o.RefillSets = append(o.RefillSets, s)
		}
	}
	wantChains := map[string]bool{}
	for _, c := range want.Chains {
		wantChains[c.Name] = true
		h, ok := have.Chains[c.Name]
		switch {
		case !ok:
			o.AddChains = append(o.AddChains, c)
		case !sameRules(h, c.Rules):
			o.RefillChains = append(o.RefillChains, c)
		}
	}
	o.DelMap = append(entries(IngressMap, have.Ingress, want.Ingress), entries(EgressMap, have.Egress, want.Egress)...)
	o.AddMap = append(entries(IngressMap, want.Ingress, have.Ingress), entries(EgressMap, want.Egress, have.Egress)...)
	for _, name := range slices.Sorted(maps.Keys(have.Chains)) {
		if !wantChains[name] {
			o.DelChains = append(o.DelChains, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(have.Sets)) {
		if !wantSets[name] {
			o.DelSets = append(o.DelSets, name)
		}
	}
	return o
}

// counterNames lists the names of cs that have lacks.
func counterNames(cs []Counter, have map[string]bool) []string {
	var out []string
	for _, c := range cs {
		if !have[c.Name] {
			out = append(out, c.Name)
		}
	}
	return out
}

// staleCounters lists, sorted, the counters of have that want lacks.
func staleCounters(want []Counter, have map[string]bool) []string {
	keep := map[string]bool{}
	for _, c := range want {
		keep[c.Name] = true
	}
	var out []string
	for _, name := range slices.Sorted(maps.Keys(have)) {
		if !keep[name] {
			out = append(out, name)
		}
	}
	return out
}

// entries lists the entries of m that other lacks or maps elsewhere,
// sorted by veth.
func entries(name string, m, other map[string]string) []MapEntry {
	var out []MapEntry
	for _, veth := range slices.Sorted(maps.Keys(m)) {
		if c, ok := other[veth]; ok && c == m[veth] {
			continue
		}
		out = append(out, MapEntry{Map: name, Veth: veth, Chain: m[veth]})
	}
	return out
}

func sameRules(tags []string, rules []NFRule) bool {
	if len(tags) != len(rules) {
		return false
	}
	for i, r := range rules {
		if tags[i] != r.String() {
			return false
		}
	}
	return true
}

// String lists the operations, one a line, for logs and test failures.
func (o Ops) String() string {
	var b strings.Builder
	if o.Delete {
		b.WriteString("delete table\n")
	}
	if o.Create {
		b.WriteString("create table (pod-to-node " + o.Skeleton.PodToNode.String() + ")\n")
	}
	for _, c := range o.AddCounters {
		b.WriteString("add counter " + c + "\n")
	}
	for _, s := range o.AddSets {
		b.WriteString("add set " + s.Name + "\n")
	}
	for _, s := range o.RefillSets {
		b.WriteString("refill set " + s.Name + "\n")
	}
	for _, c := range o.AddChains {
		b.WriteString("add chain " + c.Name + "\n")
	}
	for _, c := range o.RefillChains {
		b.WriteString("refill chain " + c.Name + "\n")
	}
	for _, e := range o.DelMap {
		b.WriteString("delete " + e.Map + " " + e.Veth + "\n")
	}
	for _, e := range o.AddMap {
		b.WriteString("add " + e.Map + " " + e.Veth + " : jump " + e.Chain + "\n")
	}
	for _, c := range o.DelChains {
		b.WriteString("delete chain " + c + "\n")
	}
	for _, s := range o.DelSets {
		b.WriteString("delete set " + s + "\n")
	}
	for _, c := range o.DelCounters {
		b.WriteString("delete counter " + c + "\n")
	}
	return b.String()
}
