package nodesnap

import (
	"context"
	"fmt"
	"strings"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
)

// cniChainPrefix starts the chains the reference portmap plugin, which
// estuary's conflist chains, writes through iptables (iptables-nft keeps
// them in nftables).
const cniChainPrefix = "CNI-"

// wholeChain says whose rules the nftables section lists: estuary's source
// NAT table's and the portmap plugin's CNI- chains'. Other parties' rules
// (kube-proxy's) are counted, not listed.
func wholeChain(table, chain string) bool {
	return table == desired.NATTable || strings.HasPrefix(chain, cniChainPrefix)
}

// nftables lists the namespace's nftables for a support bundle: every
// table and chain (hook, priority, policy and how many rules), the rules,
// one expression list a line, of the chains wholeChain selects, and the
// sets of estuary's source NAT tables.
func nftables(netns string) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) {
		ts, err := ops.ListNFTables(netns, wholeChain)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, t := range ts {
			id := t.Family + " " + t.Name
			out = append(out, fmt.Sprintf("table %s flags %#x", id, t.Flags))
			for _, c := range t.Chains {
				out = append(out, chainLines(id, c)...)
			}
			for _, l := range t.Sets {
				out = append(out, "table "+id+" "+l)
			}
		}
		return out, nil
	}
}

// chainLines renders a chain and the rules listed of it.
func chainLines(table string, c ops.NFTChain) []string {
	head := fmt.Sprintf("table %s chain %s", table, c.Name)
	if c.Hook != nil {
		head += fmt.Sprintf(" type %s hook %d", c.Type, *c.Hook)
	}
	if c.Priority != nil {
		head += fmt.Sprintf(" prio %d", *c.Priority)
	}
	if c.Policy != nil {
		head += fmt.Sprintf(" policy %d", *c.Policy)
	}
	out := []string{fmt.Sprintf("%s rules %d", head, c.Count)}
	for _, r := range c.Rules {
		line := fmt.Sprintf("table %s chain %s rule %d", table, c.Name, r.Handle)
		if r.UserData != "" {
			line += fmt.Sprintf(" userdata %q", r.UserData)
		}
		for _, e := range r.Exprs {
			line += " " + e
		}
		out = append(out, line)
	}
	return out
}
