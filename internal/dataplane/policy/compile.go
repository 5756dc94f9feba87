package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/estuary-cni/estuary/pkg/family"
)

// The table estuary owns wholly, its base chains and its verdict maps.
const (
	TableName    = "estuary-policy"
	ForwardChain = "forward"
	InputChain   = "input"
	IngressMap   = "ingress"
	EgressMap    = "egress"
)

// Ruleset is the desired content of the table below its fixed skeleton (the
// base chains and the two verdict maps, which the ops layer writes): the
// peer sets, the pod chains and the maps' entries. Sets and Chains are
// sorted by name.
type Ruleset struct {
	Sets   []Set
	Chains []Chain
	// Ingress maps a host veth to the chain packets leaving through it
	// jump to; Egress, a host veth to the chain of packets entering
	// through it.
	Ingress map[string]string
	Egress  map[string]string
	// Counters are the named counters the rules update, sorted by name
	// (verdicts.go).
	Counters []Counter
	// Skeleton is the shape of the base chains the table must have; the
	// caller sets it from the node's configuration (Compile leaves the
	// zero value).
	Skeleton Skeleton
}

// Set is a named interval set of addresses of one family.
type Set struct {
	Name   string
	Family family.Family
	Ranges []family.Range
}

// Chain is a regular chain: its rules in order.
type Chain struct {
	Name  string
	Rules []NFRule
}

// Verdict ends a rule.
type Verdict uint8

// Verdicts a pod chain uses: Return admits the direction, Drop drops the
// packet, Goto continues in the chain Rule.Goto names.
const (
	Return Verdict = iota + 1
	Drop
	Goto
)

// NFRule is one nftables rule of a pod chain: every match it has must
// hold for its verdict to apply.
type NFRule struct {
	// Set, when not empty, is the peer set the address must be in: the
	// source address when Src, else the destination; Family is the set's.
	Set    string
	Family family.Family
	Src    bool
	// Protocol, when not 0, is the IP protocol; From-To, when From is not
	// 0, the destination port range.
	Protocol Protocol
	From, To uint16
	Verdict  Verdict
	Goto     string
	// Counter, when not empty, is the named counter the rule updates
	// before its verdict. LogPrefix, when not empty, makes the rule a log
	// rule (no verdict): it logs what it matches to DropLogGroup with that
	// prefix, within DropLogLimit.
	Counter   string
	LogPrefix string
}

// String renders the rule in nft's syntax; it is also the rule's tag in
// the kernel, by which the read-back recognises it.
func (r NFRule) String() string {
	var parts []string
	if r.Set != "" {
		dir := "daddr"
		if r.Src {
			dir = "saddr"
		}
		ip := "ip"
		if r.Family == family.IPv6 {
			ip = "ip6"
		}
		parts = append(parts, ip, dir, "@"+r.Set)
	}
	switch {
	case r.Protocol != 0 && r.From != 0:
		ports := strconv.Itoa(int(r.From))
		if r.To != r.From {
			ports += "-" + strconv.Itoa(int(r.To))
		}
		parts = append(parts, r.Protocol.String(), "dport", ports)
	case r.Protocol != 0:
		parts = append(parts, "meta l4proto", r.Protocol.String())
	}
	if r.LogPrefix != "" {
		parts = append(parts, "limit name", strconv.Quote(DropLogLimit), "log prefix", strconv.Quote(r.LogPrefix),
			"group", strconv.Itoa(int(DropLogGroup)))
	}
	if r.Counter != "" {
		parts = append(parts, "counter name", strconv.Quote(r.Counter))
	}
	switch r.Verdict {
	case Return:
		parts = append(parts, "return")
	case Drop:
		parts = append(parts, "drop")
	case Goto:
		parts = append(parts, "goto", r.Goto)
	}
	return strings.Join(parts, " ")
}

// IngressChain and EgressChain name an endpoint's chains.
func IngressChain(veth string) string { return "i-" + veth }

// EgressChain names the chain of what an endpoint sends.
func EgressChain(veth string) string { return "e-" + veth }

// SetName names the peer set of a rule ID in one family.
func SetName(id string, fam family.Family) string {
	sum := sha256.Sum256([]byte(id))
	return "p-" + hex.EncodeToString(sum[:8]) + "-" + strconv.Itoa(fam.Version())
}

// Compile turns a node's model into its desired ruleset. What cannot be
// compiled costs its own endpoint only, and fails closed there: an
// endpoint whose host veth is not a link name gets no chain (no such link
// exists to match); a direction holding a rule Validate rejects, or a rule
// whose ID names other peers than the same ID does elsewhere, gets a chain
// that drops everything; so do both directions of an endpoint with an
// address that is not IPv4 or IPv6, or whose host veth appears twice. The
// ruleset is always whole and valid to apply; the error lists each
// endpoint so replaced (nil when none was).
func Compile(n Node) (Ruleset, error) {
	c := compiler{sets: map[string]Set{}, peers: map[string]Peers{}, counters: map[string]Counter{}}
	rs := Ruleset{Ingress: map[string]string{}, Egress: map[string]string{}}
	count := map[string]int{}
	for _, e := range n.Endpoints {
		count[e.HostVeth]++
	}
	var errs []error
	done := map[string]bool{}
	for i, e := range n.Endpoints {
		if !vethName.MatchString(e.HostVeth) {
			errs = append(errs, fmt.Errorf("endpoint %d: host veth %q is not a link name: no chain", i, e.HostVeth))
			continue
		}
		if done[e.HostVeth] {
			continue
		}
		done[e.HostVeth] = true
		closed := e.validateAddrs()
		if count[e.HostVeth] > 1 {
			closed = fmt.Errorf("endpoint %s: host veth appears %d times", e.HostVeth, count[e.HostVeth])
		}
		if closed != nil {
			errs = append(errs, fmt.Errorf("%w: both its chains drop everything", closed))
		}
		for _, d := range []struct {
			dir   Direction
			what  string
			chain string
			src   bool
			vmap  map[string]string
		}{
			{e.Ingress, "ingress", IngressChain(e.HostVeth), true, rs.Ingress},
			{e.Egress, "egress", EgressChain(e.HostVeth), false, rs.Egress},
		} {
			chains := []Chain{dropAll(d.chain)}
			if closed == nil {
				var err error
				if chains, err = c.direction(d.chain, d.src, d.dir); err != nil {
					errs = append(errs, fmt.Errorf("endpoint %s %s: %w: its chain drops everything", e.HostVeth, d.what, err))
					chains = []Chain{dropAll(d.chain)}
				}
			}
			if len(chains) > 0 {
				chains = c.logDrops(chains, e.HostVeth, d.src)
				d.vmap[e.HostVeth] = d.chain
				rs.Chains = append(rs.Chains, chains...)
			}
		}
	}
	for _, s := range c.sets {
		if len(s.Ranges) > 0 {
			rs.Sets = append(rs.Sets, s)
		}
	}
	slices.SortFunc(rs.Sets, func(a, b Set) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(rs.Chains, func(a, b Chain) int { return strings.Compare(a.Name, b.Name) })
	rs.Counters = c.sortedCounters()
	return rs, errors.Join(errs...)
}

// dropAll is the chain of a direction that cannot be compiled.
func dropAll(name string) Chain { return Chain{Name: name, Rules: []NFRule{{Verdict: Drop}}} }

type compiler struct {
	sets  map[string]Set
	peers map[string]Peers // by rule ID: the peers its sets were made of
	// counters by name: those the rules compiled so far update.
	counters map[string]Counter
	// newSets and newIDs are the sets and IDs the direction being compiled
	// added, undone when it fails.
	newSets, newIDs []string
}

// direction compiles one direction, or nothing of it when it cannot be
// compiled whole.
func (c *compiler) direction(name string, src bool, d Direction) ([]Chain, error) {
	if err := d.validate(); err != nil {
		return nil, err
	}
	c.newSets, c.newIDs = c.newSets[:0], c.newIDs[:0]
	chains, err := c.chains(name, src, d)
	if err != nil {
		for _, s := range c.newSets {
			delete(c.sets, s)
		}
		for _, id := range c.newIDs {
			delete(c.peers, id)
		}
		return nil, err
	}
	return chains, nil
}

// chains compiles one direction into its chain, and the chain after
// the admin tier when a Pass rule needs one; none when it admits all.
func (c *compiler) chains(name string, src bool, d Direction) ([]Chain, error) {
	var rest []NFRule
	if d.Isolated {
		for _, r := range d.Allow {
			rs, err := c.expand(r, src, NFRule{Verdict: Return})
			if err != nil {
				return nil, err
			}
			rest = append(rest, rs...)
		}
		rest = append(rest, NFRule{Verdict: Drop, Counter: c.counter(KindIsolation, "", src, VerdictDrop)})
	} else {
		for _, r := range d.Baseline {
			rs, err := c.expand(r.Rule, src, actionVerdict(r.Action, ""))
			if err != nil {
				return nil, err
			}
			rest = append(rest, rs...)
		}
	}
	next := ""
	if len(rest) > 0 && slices.ContainsFunc(d.Admin, func(r AdminRule) bool { return r.Action == Pass }) {
		next = name + "-np"
	}
	var admin []NFRule
	for _, r := range d.Admin {
		v := actionVerdict(r.Action, next)
		if r.Action == Pass {
			v.Counter = c.ruleCounter(r.ID, src, Goto)
		}
		rs, err := c.expand(r.Rule, src, v)
		if err != nil {
			return nil, err
		}
		admin = append(admin, rs...)
	}
	if next == "" {
		if all := append(admin, rest...); len(all) > 0 {
			return []Chain{{Name: name, Rules: all}}, nil
		}
		return nil, nil
	}
	admin = append(admin, NFRule{Verdict: Goto, Goto: next})
	return []Chain{{Name: name, Rules: admin}, {Name: next, Rules: rest}}, nil
}

// actionVerdict: Allow returns (admits), Deny drops, Pass goes to next
// (returns when nothing follows the admin tier).
func actionVerdict(a Action, next string) NFRule {
	switch a {
	case Allow:
		return NFRule{Verdict: Return}
	case Deny:
		return NFRule{Verdict: Drop}
	}
	if next == "" {
		return NFRule{Verdict: Return}
	}
	return NFRule{Verdict: Goto, Goto: next}
}

// expand turns a rule into nftables rules ending in v's verdict: one per
// family its peers have addresses in (none with Any) and per port.
func (c *compiler) expand(r Rule, src bool, v NFRule) ([]NFRule, error) {
	if v.Counter == "" {
		v.Counter = c.ruleCounter(r.ID, src, v.Verdict)
	}
	var base []NFRule
	if r.Peers.Any {
		base = []NFRule{v}
	} else {
		if err := c.sameID(r); err != nil {
			return nil, err
		}
		for _, fam := range []family.Family{family.IPv4, family.IPv6} {
			name := SetName(r.ID, fam)
			s, ok := c.sets[name]
			if !ok {
				s = Set{Name: name, Family: fam, Ranges: r.Peers.ranges(fam)}
				c.sets[name] = s
				c.newSets = append(c.newSets, name)
			}
			if len(s.Ranges) == 0 {
				continue
			}
			b := v
			b.Set, b.Family, b.Src = name, fam, src
			base = append(base, b)
		}
	}
	if len(r.Ports) == 0 {
		return base, nil
	}
	out := make([]NFRule, 0, len(base)*len(r.Ports))
	for _, b := range base {
		for _, p := range r.Ports {
			b.Protocol, b.From, b.To = p.Protocol, p.From, p.last()
			out = append(out, b)
		}
	}
	return out, nil
}

// sameID checks that every rule sharing an ID has the same peers; a rule
// value seen before (the same Blocks) costs no comparison.
func (c *compiler) sameID(r Rule) error {
	prev, ok := c.peers[r.ID]
	if !ok {
		c.peers[r.ID] = r.Peers
		c.newIDs = append(c.newIDs, r.ID)
		return nil
	}
	if len(prev.Blocks) == len(r.Peers.Blocks) && (len(prev.Blocks) == 0 || &prev.Blocks[0] == &r.Peers.Blocks[0]) {
		return nil
	}
	for _, fam := range []family.Family{family.IPv4, family.IPv6} {
		if !slices.Equal(prev.ranges(fam), r.Peers.ranges(fam)) {
			return fmt.Errorf("rule ID %s names two different peer sets", r.ID)
		}
	}
	return nil
}
