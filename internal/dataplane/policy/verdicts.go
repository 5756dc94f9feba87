package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/estuary-cni/estuary/internal/policydrops"
)

// Seeing verdicts. Every rule of a pod chain that decides (admits, drops,
// or passes an admin tier on) updates a named counter object of the
// table, one per policy object, direction and verdict, shared by every
// pod the object selects; a direction's isolation drop updates the
// isolation counter of its direction. Named objects, not anonymous
// counters in the rules, because a chain refilled after a rule change
// keeps its objects and so its counts, and because a rule's tag (its
// rendering) names the counter and never holds a count, so reading the
// table back compares as before. The counters exist while a rule refers to
// them: Diff adds a counter with the first rule that counts into it and
// deletes it with the last.
//
// Every drop rule is preceded by a log rule with the same match that sends
// the packet to the kernel's netlink log group DropLogGroup, behind the
// table's named limit DropLogLimit, which all log rules share: a flood of
// drops sends the daemon at most that rate, whatever the number of pods.
// The limit gates the log rule only; the drop rule after it drops every
// packet.

// Counter is a named counter object of the table.
type Counter struct {
	Name string
	// Kind is the policy object's kind as its rule IDs name it ("np",
	// "cnp", ...) or KindIsolation; Policy the object ("<namespace>/<name>"
	// for a NetworkPolicy, "<name>" otherwise; empty for isolation).
	Kind, Policy string
	// Direction is "ingress" or "egress"; Verdict one of the Verdict*
	// names.
	Direction, Verdict string
}

// Verdict names of counters, and the kind of the isolation drop.
const (
	VerdictAccept = "accept"
	VerdictDrop   = "drop"
	VerdictPass   = "pass"
	KindIsolation = "isolation"
)

// DropLogGroup is the netlink log (NFLOG) group the drop rules log to;
// DropLogLimit the table's named limit object the log rules share, at
// DropLogRate packets a second with bursts of DropLogBurst.
const (
	DropLogGroup uint16 = 9046
	DropLogLimit        = "drop-log"
	DropLogRate         = 100
	DropLogBurst        = 200
)

// ObjectOf reads the policy object a rule ID names: "np/<ns>/<name>/..."
// gives ("np", "<ns>/<name>"), "<kind>/<name>/..." gives (kind, name),
// and a cluster policy converted from an AdminNetworkPolicy or
// BaselineAdminNetworkPolicy ("cnp/anp:<name>/...", "cnp/banp:<name>/...")
// gives ("anp", name) or ("banp", name). An ID of another shape gives
// empty strings.
func ObjectOf(id string) (kind, name string) {
	f := strings.SplitN(id, "/", 4)
	switch {
	case len(f) >= 3 && f[0] == "np":
		return f[0], f[1] + "/" + f[2]
	case len(f) >= 2 && f[0] == "cnp" && strings.Contains(f[1], ":"):
		if k, n, _ := strings.Cut(f[1], ":"); (k == "anp" || k == "banp") && n != "" {
			return k, n
		}
		return f[0], f[1]
	case len(f) >= 2 && f[0] != "" && f[1] != "":
		return f[0], f[1]
	}
	return "", ""
}

// Ref is the policy as a drop names it: "<kind>/<policy>", empty for
// isolation.
func (c Counter) Ref() string {
	if c.Kind == KindIsolation {
		return ""
	}
	return c.Kind + "/" + c.Policy
}

func direction(src bool) string {
	if src {
		return "ingress"
	}
	return "egress"
}

// counter names the counter of the object rule ID id names, in a
// direction, for a verdict, and records it; "" for an ID naming none.
func (c *compiler) counter(kind, pol string, src bool, verdict string) string {
	if kind == "" {
		return ""
	}
	dir := direction(src)
	sum := sha256.Sum256([]byte(kind + "\x00" + pol + "\x00" + dir + "\x00" + verdict))
	name := "c-" + hex.EncodeToString(sum[:8])
	c.counters[name] = Counter{Name: name, Kind: kind, Policy: pol, Direction: dir, Verdict: verdict}
	return name
}

// ruleCounter is counter for a rule ID and the verdict v ends in.
func (c *compiler) ruleCounter(id string, src bool, v Verdict) string {
	kind, pol := ObjectOf(id)
	verdict := VerdictAccept
	switch v {
	case Drop:
		verdict = VerdictDrop
	case Goto:
		verdict = VerdictPass
	}
	return c.counter(kind, pol, src, verdict)
}

// logDrops puts a log rule before every drop rule of chains that counts
// (a chain that drops everything because its direction could not be
// compiled neither counts nor logs: Compile's error reports it).
func (c *compiler) logDrops(chains []Chain, veth string, src bool) []Chain {
	for i, ch := range chains {
		if !slices.ContainsFunc(ch.Rules, func(r NFRule) bool { return r.Verdict == Drop && r.Counter != "" }) {
			continue
		}
		rules := make([]NFRule, 0, len(ch.Rules)+2)
		for _, r := range ch.Rules {
			if r.Verdict == Drop && r.Counter != "" {
				l := r
				l.Verdict, l.Counter = 0, ""
				l.LogPrefix = policydrops.LogPrefix(direction(src), veth, c.counters[r.Counter].Ref(), r.Counter)
				rules = append(rules, l)
			}
			rules = append(rules, r)
		}
		chains[i].Rules = rules
	}
	return chains
}

// sortedCounters lists the recorded counters by name.
func (c *compiler) sortedCounters() []Counter {
	out := make([]Counter, 0, len(c.counters))
	for _, k := range c.counters {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b Counter) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Count is what a named counter has counted.
type Count struct {
	Packets, Bytes uint64
}

// WithoutDropLog is rs without its log rules, for a node whose netlink log
// cannot be read (the kernel refuses a log rule without nfnetlink_log):
// drops are still counted.
func (rs Ruleset) WithoutDropLog() Ruleset {
	out := rs
	out.Chains = make([]Chain, len(rs.Chains))
	for i, c := range rs.Chains {
		out.Chains[i] = Chain{Name: c.Name, Rules: slices.DeleteFunc(slices.Clone(c.Rules), func(r NFRule) bool { return r.LogPrefix != "" })}
	}
	return out
}
