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

// NFTable is an nftables table as a listing sees it.
type NFTable struct {
	Family string // nft's word: ip, ip6, inet, arp, bridge, netdev
	Name   string
	Flags  uint32
	Chains []NFTChain
	// Sets are the sets of estuary's source NAT table, a line each in the
	// form NAT compares them in; empty for any other table.
	Sets []string
}

// NFTChain is a chain as a listing sees it.
type NFTChain struct {
	Name     string
	Type     string
	Hook     *uint32 // nil for a regular chain
	Priority *int32
	Policy   *uint32
	Count    int       // its rules
	Rules    []NFTRule // listed only when asked for
}

// NFTRule is a rule: its handle, its tag and its expressions, each as its
// type and fields.
type NFTRule struct {
	Handle   uint64
	UserData string
	Exprs    []string
}

// ListNFTables lists the nftables of the namespace at nsPath (the process's
// own when empty): every table and chain, ordered by family and name, with
// the rules of the chains whole(table, chain) selects; others' rules are
// only counted.
func ListNFTables(nsPath string, whole func(table, chain string) bool) ([]NFTable, error) {
	c, err := openNFT(nsPath)
	if err != nil {
		return nil, err
	}
	defer c.close()
	ts, err := c.ListTables()
	if err != nil {
		return nil, fmt.Errorf("list nftables tables: %w", err)
	}
	cs, err := c.ListChains()
	if err != nil {
		return nil, fmt.Errorf("list nftables chains: %w", err)
	}
	slices.SortFunc(ts, func(a, b *nftables.Table) int { return strings.Compare(tableID(a), tableID(b)) })
	out := make([]NFTable, 0, len(ts))
	for _, t := range ts {
		rec := NFTable{Family: nftFamily(t.Family), Name: t.Name, Flags: t.Flags}
		for _, ch := range cs {
			if ch.Table.Name != t.Name || ch.Table.Family != t.Family {
				continue
			}
			chr, err := listChain(c, t, ch, whole(t.Name, ch.Name))
			if err != nil {
				return nil, err
			}
			rec.Chains = append(rec.Chains, chr)
		}
		if t.Name == desired.NATTable {
			var b strings.Builder
			if err := (&NAT{conn: c}).setsImage(&b, t); err != nil {
				return nil, err
			}
			for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
				if l != "" {
					rec.Sets = append(rec.Sets, l)
				}
			}
		}
		out = append(out, rec)
	}
	return out, nil
}

// listChain reads a chain and, when whole, its rules.
func listChain(c *nftConn, t *nftables.Table, ch *nftables.Chain, whole bool) (NFTChain, error) {
	rs, err := c.GetRules(t, ch)
	if err != nil {
		return NFTChain{}, fmt.Errorf("list rules of nftables chain %s %s: %w", tableID(t), ch.Name, err)
	}
	rec := NFTChain{Name: ch.Name, Type: string(ch.Type), Count: len(rs)}
	if ch.Hooknum != nil {
		h := uint32(*ch.Hooknum)
		rec.Hook = &h
	}
	if ch.Priority != nil {
		p := int32(*ch.Priority)
		rec.Priority = &p
	}
	if ch.Policy != nil {
		p := uint32(*ch.Policy)
		rec.Policy = &p
	}
	if !whole {
		return rec, nil
	}
	for _, r := range rs {
		nr := NFTRule{Handle: r.Handle, UserData: string(bytes.TrimRight(r.UserData, "\x00"))}
		for _, e := range r.Exprs {
			nr.Exprs = append(nr.Exprs, exprString(e))
		}
		rec.Rules = append(rec.Rules, nr)
	}
	return rec, nil
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
