package ops

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/pkg/family"
)

// The source NAT's nftables objects (owner overlay) are named in package
// desired: the table desired.NATTable, one per family and estuary's wholly,
// its chain desired.NATChain and its sets desired.NATSetSources and
// desired.NATSetCluster. Nothing outside the table is read or written.
const (
	natTagPrefix = "estuary/masquerade/v1 oifname!="
	// natMarkTag tags the rule that leaves packets carrying kube-proxy's
	// masquerade mark to kube-proxy; the mark follows in hex.
	natMarkTag = "estuary/kube-proxy-mark/v1 return mark&"
)

// NAT writes estuary's source NAT into the nftables of one namespace.
type NAT struct {
	conn *nftConn
}

// OpenNAT returns a NAT writer for the network namespace at nsPath (the
// process's own when empty), with its own nftables socket inside that
// namespace.
func OpenNAT(nsPath string) (*NAT, error) {
	c, err := openNFT(nsPath)
	if err != nil {
		return nil, err
	}
	return &NAT{conn: c}, nil
}

// Close releases the namespace handle.
func (n *NAT) Close() { n.conn.close() }

var natFamilies = []struct {
	fam family.Family
	tf  nftables.TableFamily
}{{family.IPv4, nftables.TableFamilyIPv4}, {family.IPv6, nftables.TableFamilyIPv6}}

// Ensure makes estuary's table of each family hold exactly want: a table
// whose family is empty in want is deleted. A table that already matches is
// left untouched; one that differs in anything (chain, rule, set elements,
// an extra object) is rewritten in a single atomic batch, so no packet ever
// sees a half-written table. It returns the families it changed.
func (n *NAT) Ensure(want desired.NAT) ([]family.Family, error) {
	var changed []family.Family
	for _, f := range natFamilies {
		wf := want.Family(f.fam).Canonical()
		have, present, err := n.readImage(f.tf)
		if err != nil {
			return changed, err
		}
		if (!present && wf.Empty()) || (present && !wf.Empty() && have == natImage(wf, f.fam)) {
			continue
		}
		if err := n.write(f.tf, f.fam, wf, present); err != nil {
			return changed, err
		}
		changed = append(changed, f.fam)
	}
	return changed, nil
}

func (n *NAT) write(tf nftables.TableFamily, fam family.Family, f desired.NATFamily, present bool) error {
	t := &nftables.Table{Name: desired.NATTable, Family: tf}
	if present {
		n.conn.DelTable(t)
	}
	if !f.Empty() {
		if err := n.addTable(t, fam, f); err != nil {
			return fmt.Errorf("nftables table %s ipv%d: %w", desired.NATTable, fam.Version(), err)
		}
	}
	if err := n.conn.Flush(); err != nil {
		return fmt.Errorf("write nftables table %s ipv%d: %w", desired.NATTable, fam.Version(), err)
	}
	return nil
}

func (n *NAT) addTable(t *nftables.Table, fam family.Family, f desired.NATFamily) error {
	t = n.conn.AddTable(t)
	ch := n.conn.AddChain(&nftables.Chain{
		Name: desired.NATChain, Table: t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource,
	})
	key := nftables.TypeIPAddr
	if fam == family.IPv6 {
		key = nftables.TypeIP6Addr
	}
	src := &nftables.Set{Table: t, Name: desired.NATSetSources, KeyType: key, Interval: true}
	if err := n.conn.AddSet(src, intervalElements(desired.Ranges(f.Sources), fam)); err != nil {
		return fmt.Errorf("set %s: %w", desired.NATSetSources, err)
	}
	cl := &nftables.Set{Table: t, Name: desired.NATSetCluster, KeyType: key, Interval: true}
	if err := n.conn.AddSet(cl, intervalElements(desired.Ranges(f.Exempt), fam)); err != nil {
		return fmt.Errorf("set %s: %w", desired.NATSetCluster, err)
	}
	if f.SkipMark != 0 {
		n.conn.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: markReturnExprs(f.SkipMark),
			UserData: []byte(markTag(f.SkipMark))})
	}
	n.conn.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: masqExprs(fam, f.Device, src, cl),
		UserData: []byte(natTagPrefix + f.Device)})
	return nil
}

// masqExprs: saddr @nat-sources, daddr != @cluster, oifname != dev, masquerade.
func masqExprs(fam family.Family, dev string, src, cl *nftables.Set) []expr.Any {
	saddr, daddr, size := uint32(12), uint32(16), uint32(4)
	if fam == family.IPv6 {
		saddr, daddr, size = 8, 24, 16
	}
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: saddr, Len: size},
		&expr.Lookup{SourceRegister: 1, SetName: src.Name, SetID: src.ID},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: size},
		&expr.Lookup{SourceRegister: 1, SetName: cl.Name, SetID: cl.ID, Invert: true},
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: ifname(dev)},
		&expr.Masq{},
	}
}

// markReturnExprs: meta mark & mark == mark return. The chain's later rule
// then never masquerades what kube-proxy marked for its own masquerade.
func markReturnExprs(mark uint32) []expr.Any {
	m := binaryutil.NativeEndian.PutUint32(mark)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: m, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: m},
		&expr.Verdict{Kind: expr.VerdictReturn},
	}
}

func markTag(mark uint32) string { return fmt.Sprintf("%s%#08x", natMarkTag, mark) }

// ifname pads a link name with NULs to IFNAMSIZ, as the kernel compares it.
func ifname(s string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, s)
	return b
}

// natImage renders what the table should hold in the form readImage renders
// the kernel's, so that one string comparison says whether they differ.
func natImage(f desired.NATFamily, fam family.Family) string {
	var b strings.Builder
	fmt.Fprintf(&b, "chain %s type %s hook %d prio %d\n", desired.NATChain, nftables.ChainTypeNAT,
		*nftables.ChainHookPostrouting, *nftables.ChainPriorityNATSource)
	if f.SkipMark != 0 {
		fmt.Fprintf(&b, "rule %s\n", markTag(f.SkipMark))
	}
	fmt.Fprintf(&b, "rule %s\n", natTagPrefix+f.Device)
	b.WriteString(setImage(desired.NATSetCluster, intervalElements(desired.Ranges(f.Exempt), fam)))
	b.WriteString(setImage(desired.NATSetSources, intervalElements(desired.Ranges(f.Sources), fam)))
	return b.String()
}

func setImage(name string, els []nftables.SetElement) string {
	keys := make([]string, 0, len(els))
	for _, e := range els {
		a, _ := netip.AddrFromSlice(e.Key)
		k := a.String()
		if e.IntervalEnd {
			k = "end " + k
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return fmt.Sprintf("set %s interval {%s}\n", name, strings.Join(keys, ", "))
}

// readImage renders estuary's table of family tf as it is in the kernel.
func (n *NAT) readImage(tf nftables.TableFamily) (string, bool, error) {
	ts, err := n.conn.ListTablesOfFamily(tf)
	if err != nil {
		return "", false, fmt.Errorf("list nftables tables: %w", err)
	}
	i := slices.IndexFunc(ts, func(t *nftables.Table) bool { return t.Name == desired.NATTable })
	if i < 0 {
		return "", false, nil
	}
	t := ts[i]
	var b strings.Builder
	if err := n.chainsImage(&b, t); err != nil {
		return "", true, err
	}
	if err := n.setsImage(&b, t); err != nil {
		return "", true, err
	}
	return b.String(), true, nil
}

func (n *NAT) chainsImage(b *strings.Builder, t *nftables.Table) error {
	cs, err := n.conn.ListChainsOfTableFamily(t.Family)
	if err != nil {
		return fmt.Errorf("list chains of nftables table %s: %w", t.Name, err)
	}
	for _, c := range cs {
		if c.Table.Name != t.Name {
			continue
		}
		var hook, prio int64 = -1, -1
		if c.Hooknum != nil && c.Priority != nil {
			hook, prio = int64(*c.Hooknum), int64(*c.Priority)
		}
		fmt.Fprintf(b, "chain %s type %s hook %d prio %d\n", c.Name, c.Type, hook, prio)
		rs, err := n.conn.GetRules(t, c)
		if err != nil {
			return fmt.Errorf("list rules of nftables chain %s %s: %w", t.Name, c.Name, err)
		}
		for _, r := range rs {
			fmt.Fprintf(b, "rule %s\n", bytes.TrimRight(r.UserData, "\x00"))
		}
	}
	return nil
}

func (n *NAT) setsImage(b *strings.Builder, t *nftables.Table) error {
	ss, err := n.conn.GetSets(t)
	if err != nil {
		return fmt.Errorf("list sets of nftables table %s: %w", t.Name, err)
	}
	slices.SortFunc(ss, func(x, y *nftables.Set) int { return strings.Compare(x.Name, y.Name) })
	for _, s := range ss {
		els, err := n.conn.GetSetElements(s)
		if err != nil {
			return fmt.Errorf("list elements of nftables set %s %s: %w", t.Name, s.Name, err)
		}
		if !s.Interval {
			b.WriteString("not interval ")
		}
		b.WriteString(setImage(s.Name, els))
	}
	return nil
}
