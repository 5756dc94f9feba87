package ops

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"

	"github.com/estuary-cni/estuary/pkg/family"
)

// nftConn is one namespace's nftables connection, which NAT and Policy
// each open for themselves (OpenNAT, OpenPolicy): the socket, the namespace
// it was opened in, and the options that open another socket there.
type nftConn struct {
	*nftables.Conn
	ns   netns.NsHandle
	opts []nftables.ConnOption
}

// openNFT opens an nftables socket inside the network namespace at nsPath
// (the process's own when empty) with opts; the caller's thread never
// moves.
func openNFT(nsPath string, opts ...nftables.ConnOption) (*nftConn, error) {
	c := &nftConn{ns: netns.None(), opts: opts}
	if nsPath != "" {
		ns, err := netns.GetFromPath(nsPath)
		if err != nil {
			return nil, fmt.Errorf("open network namespace %s: %w", nsPath, err)
		}
		c.ns = ns
		c.opts = append(c.opts, nftables.WithNetNSFd(int(ns)))
	}
	nc, err := nftables.New(c.opts...)
	if err != nil {
		c.close()
		return nil, fmt.Errorf("open nftables in %q: %w", nsPath, err)
	}
	c.Conn = nc
	return c, nil
}

// fresh opens another socket in the same namespace, for a batch that must
// not share its queue with anything else.
func (c *nftConn) fresh() (*nftables.Conn, error) {
	nc, err := nftables.New(c.opts...)
	if err != nil {
		return nil, fmt.Errorf("open nftables: %w", err)
	}
	return nc, nil
}

// close releases the namespace handle.
func (c *nftConn) close() {
	if c.ns.IsOpen() {
		_ = c.ns.Close()
	}
}

// intervalElements encodes sorted, disjoint ranges of family fam as the
// elements of an nftables interval set, as nft writes them: a start key per
// range and an interval-end key just past it (none for a range that reaches
// the top of the address space), plus an interval end at the zero address
// when the first range does not start there. The source NAT's and the
// policy table's address sets both go through it; intervalRanges reads
// them back.
func intervalElements(rs []family.Range, fam family.Family) []nftables.SetElement {
	if len(rs) == 0 {
		return nil
	}
	var els []nftables.SetElement
	if !rs[0].First.IsUnspecified() {
		els = append(els, nftables.SetElement{Key: zeroAddr(fam).AsSlice(), IntervalEnd: true})
	}
	for _, r := range rs {
		els = append(els, nftables.SetElement{Key: r.First.AsSlice()})
		if next := r.Last.Next(); next.IsValid() {
			els = append(els, nftables.SetElement{Key: next.AsSlice(), IntervalEnd: true})
		}
	}
	return els
}

// intervalRanges reads interval-set elements back into ranges: each start
// runs to just before the next interval end, or to the top of the family.
func intervalRanges(els []nftables.SetElement) ([]family.Range, error) {
	type el struct {
		a   netip.Addr
		end bool
	}
	var es []el
	for _, e := range els {
		a, ok := netip.AddrFromSlice(e.Key)
		if !ok {
			return nil, fmt.Errorf("set element key %x is not an address", e.Key)
		}
		es = append(es, el{a, e.IntervalEnd})
	}
	slices.SortFunc(es, func(x, y el) int { return x.a.Compare(y.a) })
	var out []family.Range
	for i, e := range es {
		if e.end {
			continue
		}
		r := family.Range{First: e.a, Last: family.LastAddr(netip.PrefixFrom(e.a, 0))}
		if i+1 < len(es) {
			if !es[i+1].end {
				return nil, fmt.Errorf("set elements %s and %s start two intervals without an end", e.a, es[i+1].a)
			}
			r.Last = es[i+1].a.Prev()
		}
		out = append(out, r)
	}
	return out, nil
}

func zeroAddr(fam family.Family) netip.Addr {
	if fam == family.IPv6 {
		return netip.IPv6Unspecified()
	}
	return netip.IPv4Unspecified()
}
