package ops

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// cniChainPrefix starts the chains the reference portmap plugin, which
// estuary's conflist chains, writes through iptables (iptables-nft keeps
// them in nftables).
const cniChainPrefix = "CNI-"

// Dump lists the namespace's nftables for a support bundle: every table and
// chain (hook, priority, policy and how many rules), and the rules, one
// expression list a line, of estuary's tables and of the portmap plugin's
// CNI- chains, with the sets of estuary's tables. Other parties' rules
// (kube-proxy's) are counted, not listed.
func (n *NAT) Dump() ([]string, error) {
	ts, err := n.conn.ListTables()
	if err != nil {
		return nil, fmt.Errorf("list nftables tables: %w", err)
	}
	cs, err := n.conn.ListChains()
	if err != nil {
		return nil, fmt.Errorf("list nftables chains: %w", err)
	}
	slices.SortFunc(ts, func(a, b *nftables.Table) int { return strings.Compare(tableID(a), tableID(b)) })
	var out []string
	for _, t := range ts {
		out = append(out, fmt.Sprintf("table %s flags %#x", tableID(t), t.Flags))
		for _, c := range cs {
			if c.Table.Name != t.Name || c.Table.Family != t.Family {
				continue
			}
			lines, err := n.dumpChain(t, c)
			if err != nil {
				return nil, err
			}
			out = append(out, lines...)
		}
		if t.Name == desired.NATTable {
			var b strings.Builder
			if err := n.setsImage(&b, t); err != nil {
				return nil, err
			}
			for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
				if l != "" {
					out = append(out, "table "+tableID(t)+" "+l)
				}
			}
		}
	}
	return out, nil
}

// dumpChain renders a chain and, when it is estuary's or portmap's, its
// rules.
func (n *NAT) dumpChain(t *nftables.Table, c *nftables.Chain) ([]string, error) {
	rs, err := n.conn.GetRules(t, c)
	if err != nil {
		return nil, fmt.Errorf("list rules of nftables chain %s %s: %w", tableID(t), c.Name, err)
	}
	head := fmt.Sprintf("table %s chain %s", tableID(t), c.Name)
	if c.Hooknum != nil {
		head += fmt.Sprintf(" type %s hook %d", c.Type, *c.Hooknum)
	}
	if c.Priority != nil {
		head += fmt.Sprintf(" prio %d", *c.Priority)
	}
	if c.Policy != nil {
		head += fmt.Sprintf(" policy %d", *c.Policy)
	}
	out := []string{fmt.Sprintf("%s rules %d", head, len(rs))}
	if t.Name != desired.NATTable && !strings.HasPrefix(c.Name, cniChainPrefix) {
		return out, nil
	}
	for _, r := range rs {
		line := fmt.Sprintf("table %s chain %s rule %d", tableID(t), c.Name, r.Handle)
		if tag := bytes.TrimRight(r.UserData, "\x00"); len(tag) > 0 {
			line += fmt.Sprintf(" userdata %q", tag)
		}
		for _, e := range r.Exprs {
			line += " " + exprString(e)
		}
		out = append(out, line)
	}
	return out, nil
}

// exprString renders one rule expression as its type and fields.
func exprString(e expr.Any) string {
	name := strings.TrimPrefix(fmt.Sprintf("%T", e), "*expr.")
	return name + strings.TrimPrefix(fmt.Sprintf("%+v", e), "&")
}

func tableID(t *nftables.Table) string {
	return nftFamily(t.Family) + " " + t.Name
}

func nftFamily(f nftables.TableFamily) string {
	switch f {
	case nftables.TableFamilyIPv4:
		return "ip"
	case nftables.TableFamilyIPv6:
		return "ip6"
	case nftables.TableFamilyINet:
		return "inet"
	case nftables.TableFamilyARP:
		return "arp"
	case nftables.TableFamilyBridge:
		return "bridge"
	case nftables.TableFamilyNetdev:
		return "netdev"
	}
	return fmt.Sprintf("family%d", f)
}
