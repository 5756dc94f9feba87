package nstest

import (
	"fmt"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
)

// ProbeNFTQueue reports whether the kernel accepts an nftables rule with a
// queue statement (CONFIG_NFT_QUEUE), the rule NetworkPolicy enforcers such
// as kube-network-policies install to hand new connections to userspace.
// In a fresh namespace of its own it adds a table with a forward chain and
// an accept rule, then the rule `queue num 100 bypass`; nil means the
// kernel took both, and an error names the step the kernel refused. The
// nft command that shows the same:
//
//	ip netns add probe
//	ip netns exec probe nft 'add table inet probe; add chain inet probe c { type filter hook forward priority 0; }; add rule inet probe c queue num 100 bypass'
//	ip netns del probe
func ProbeNFTQueue(tb testing.TB) error {
	tb.Helper()
	path := New(tb)
	h, err := netns.GetFromPath(path)
	if err != nil {
		return fmt.Errorf("nft queue probe: open namespace %s: %w", path, err)
	}
	defer func() { _ = h.Close() }()
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		return fmt.Errorf("nft queue probe: nftables in %s: %w", path, err)
	}
	table := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: "probe"})
	chain := c.AddChain(&nftables.Chain{Name: "forward", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter})
	c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nft queue probe: table inet probe with a forward chain and an accept rule in %s: %w", path, err)
	}
	c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{&expr.Queue{Num: 100, Flag: expr.QueueFlagBypass}}})
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nft queue probe: rule `queue num 100 bypass` refused (kernel without CONFIG_NFT_QUEUE?): %w", err)
	}
	return nil
}

// RequireNFTQueue skips the test unless the kernel accepts nftables' queue
// statement (ProbeNFTQueue), naming why.
func RequireNFTQueue(tb testing.TB) {
	tb.Helper()
	if err := ProbeNFTQueue(tb); err != nil {
		tb.Skipf("NetworkPolicy enforcement through nfqueue cannot run here: %v", err)
	}
}
