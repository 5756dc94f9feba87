package ops

// Design: the policy table is estuary's wholly (policy.TableName, family
// inet). Apply sends a whole policy.Ops in one netlink batch, which
// nftables applies as one transaction: packets see the old ruleset or the
// new one, never a part. The socket's send buffer is raised (SO_SNDBUFFORCE)
// so that a batch refilling large sets fits in the one message the kernel
// requires of a batch. Read renders each rule by the tag it was written
// with (policy.NFRule.String), as the NAT writer does: a rule of estuary's
// table that someone rewrote in place without its tag is not noticed.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/pkg/family"
)

// policySendBuffer bounds a policy batch (the kernel takes a batch as one
// message of at most the socket's send buffer).
const policySendBuffer = 256 << 20

// elementChunk is how many set or map elements go in one message of a
// batch.
const elementChunk = 2048

// Policy writes and reads estuary's policy table in one namespace.
type Policy struct {
	conn  *nftConn // reads; each Apply opens a socket of its own
	table *nftables.Table
}

// OpenPolicy returns a Policy for the network namespace at nsPath (the
// process's own when empty), with a netlink socket of its own there.
func OpenPolicy(nsPath string) (*Policy, error) {
	c, err := openNFT(nsPath, nftables.WithSockOptions(forceSendBuffer(policySendBuffer)))
	if err != nil {
		return nil, err
	}
	return &Policy{conn: c, table: &nftables.Table{Name: policy.TableName, Family: nftables.TableFamilyINet}}, nil
}

// Close releases the namespace handle.
func (p *Policy) Close() { p.conn.close() }

func forceSendBuffer(n int) nftables.SockOption {
	return func(c *netlink.Conn) error {
		rc, err := c.SyscallConn()
		if err != nil {
			return fmt.Errorf("netlink socket: %w", err)
		}
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, n)
		}); err != nil {
			return fmt.Errorf("netlink socket: %w", err)
		}
		if serr != nil {
			return fmt.Errorf("netlink socket send buffer %d: %w", n, serr)
		}
		return nil
	}
}

// Ensure makes the table hold want: it reads the table back, diffs and
// applies the difference in one batch, and returns what it applied (empty
// when the table already held want).
func (p *Policy) Ensure(want policy.Ruleset) (policy.Ops, error) {
	have, err := p.Read()
	if err != nil {
		return policy.Ops{}, err
	}
	o := policy.Diff(want, have)
	if o.Empty() {
		return o, nil
	}
	return o, p.Apply(o)
}

// Remove deletes the table, and says whether it was there.
func (p *Policy) Remove() (bool, error) {
	have, err := p.Read()
	if err != nil || !have.Present {
		return false, err
	}
	return true, p.Apply(policy.Ops{Delete: true})
}

// Apply sends o in one batch. The batch is queued on a connection of its
// own, so one that fails half-queued is dropped whole.
func (p *Policy) Apply(o policy.Ops) error {
	c, err := p.conn.fresh()
	if err != nil {
		return err
	}
	b := &policyBatch{conn: c, table: p.table}
	if err := b.queue(o); err != nil {
		return fmt.Errorf("nftables table inet %s: %w", policy.TableName, err)
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("write nftables table inet %s: %w", policy.TableName, err)
	}
	return nil
}

// policyBatch queues one Apply's messages.
type policyBatch struct {
	conn  *nftables.Conn
	table *nftables.Table
}

func (p *policyBatch) queue(o policy.Ops) error {
	t := p.table
	if o.Delete {
		p.conn.DelTable(t)
	}
	if o.Create {
		p.addSkeleton(o.Skeleton)
		p.conn.AddObj(dropLogLimit(t))
	}
	p.addCounters(o.AddCounters)
	added := map[string]*nftables.Set{}
	for _, s := range o.AddSets {
		ns := &nftables.Set{Table: t, Name: s.Name, KeyType: setKeyType(s.Family), Interval: true}
		if err := p.conn.AddSet(ns, nil); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
		added[s.Name] = ns
		if err := p.addElements(ns, intervalElements(s.Ranges, s.Family)); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
	}
	for _, s := range o.RefillSets {
		ns := &nftables.Set{Table: t, Name: s.Name, KeyType: setKeyType(s.Family), Interval: true}
		p.conn.FlushSet(ns)
		if err := p.addElements(ns, intervalElements(s.Ranges, s.Family)); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
	}
	chains := map[string]*nftables.Chain{}
	for _, c := range o.AddChains {
		chains[c.Name] = p.conn.AddChain(&nftables.Chain{Name: c.Name, Table: t})
	}
	for _, c := range o.RefillChains {
		ch := &nftables.Chain{Name: c.Name, Table: t}
		p.conn.FlushChain(ch)
		chains[c.Name] = ch
	}
	for _, c := range slices.Concat(o.AddChains, o.RefillChains) {
		for _, r := range c.Rules {
			p.conn.AddRule(&nftables.Rule{Table: t, Chain: chains[c.Name], Exprs: ruleExprs(r, added),
				UserData: []byte(r.String())})
		}
	}
	if err := p.mapEntries(o.DelMap, true); err != nil {
		return err
	}
	if err := p.mapEntries(o.AddMap, false); err != nil {
		return err
	}
	for _, name := range o.DelChains {
		ch := &nftables.Chain{Name: name, Table: t}
		p.conn.FlushChain(ch)
	}
	for _, name := range o.DelChains {
		p.conn.DelChain(&nftables.Chain{Name: name, Table: t})
	}
	for _, name := range o.DelSets {
		p.conn.DelSet(&nftables.Set{Table: t, Name: name})
	}
	p.delCounters(o.DelCounters)
	return nil
}

func (p *policyBatch) addElements(s *nftables.Set, els []nftables.SetElement) error {
	for chunk := range slices.Chunk(els, elementChunk) {
		if err := p.conn.SetAddElements(s, chunk); err != nil {
			return err
		}
	}
	return nil
}

func (p *policyBatch) mapEntries(es []policy.MapEntry, del bool) error {
	by := map[string][]nftables.SetElement{}
	for _, e := range es {
		by[e.Map] = append(by[e.Map], vmapElement(e.Veth, e.Chain))
	}
	for _, name := range slices.Sorted(maps.Keys(by)) {
		m := verdictMap(p.table, name)
		for chunk := range slices.Chunk(by[name], elementChunk) {
			var err error
			if del {
				err = p.conn.SetDeleteElements(m, chunk)
			} else {
				err = p.conn.SetAddElements(m, chunk)
			}
			if err != nil {
				return fmt.Errorf("verdict map %s: %w", name, err)
			}
		}
	}
	return nil
}

func setKeyType(fam family.Family) nftables.SetDatatype {
	if fam == family.IPv6 {
		return nftables.TypeIP6Addr
	}
	return nftables.TypeIPAddr
}

// Read renders the table as it is in the kernel.
func (p *Policy) Read() (policy.Table, error) {
	tab := policy.Table{Sets: map[string]policy.Set{}, Chains: map[string][]string{},
		Ingress: map[string]string{}, Egress: map[string]string{}, Counters: map[string]bool{}}
	ts, err := p.conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return tab, fmt.Errorf("list nftables tables: %w", err)
	}
	if !slices.ContainsFunc(ts, func(t *nftables.Table) bool { return t.Name == policy.TableName }) {
		return tab, nil
	}
	tab.Present = true
	skel, err := p.readChains(&tab)
	if err != nil {
		return tab, err
	}
	mapsOK, err := p.readSets(&tab)
	if err != nil {
		return tab, err
	}
	objsOK, err := p.readObjects(&tab)
	if err != nil {
		return tab, err
	}
	tab.Skeleton = skel && mapsOK && objsOK
	return tab, nil
}

func (p *Policy) readChains(tab *policy.Table) (bool, error) {
	cs, err := p.conn.ListChainsOfTableFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, fmt.Errorf("list chains of nftables table inet %s: %w", policy.TableName, err)
	}
	var base []string
	for _, c := range cs {
		if c.Table.Name != policy.TableName {
			continue
		}
		rs, err := p.conn.GetRules(p.table, c)
		if err != nil {
			return false, fmt.Errorf("list rules of nftables chain inet %s %s: %w", policy.TableName, c.Name, err)
		}
		tags := make([]string, 0, len(rs))
		for _, r := range rs {
			tags = append(tags, string(bytes.TrimRight(r.UserData, "\x00")))
		}
		if c.Hooknum == nil {
			tab.Chains[c.Name] = tags
			continue
		}
		base = append(base, chainImage(c, tags))
	}
	slices.Sort(base)
	img := strings.Join(base, "")
	for _, s := range policy.Skeletons() {
		if img == skeletonImage(s) {
			tab.Shape = s
			return true, nil
		}
	}
	return false, nil
}

func (p *Policy) readSets(tab *policy.Table) (bool, error) {
	ss, err := p.conn.GetSets(p.table)
	if err != nil {
		return false, fmt.Errorf("list sets of nftables table inet %s: %w", policy.TableName, err)
	}
	vmaps := 0
	for _, s := range ss {
		els, err := p.conn.GetSetElements(s)
		if err != nil {
			return false, fmt.Errorf("list elements of nftables set inet %s %s: %w", policy.TableName, s.Name, err)
		}
		if s.Name == policy.IngressMap || s.Name == policy.EgressMap {
			// google/nftables v0.3.0 reads a verdict data type into
			// KeyType, so the key type cannot be checked; a verdict map it
			// is.
			if !s.IsMap || (s.KeyType.Name != nftables.TypeVerdict.Name && s.DataType.Name != nftables.TypeVerdict.Name) {
				return false, nil
			}
			vmaps++
			readVmap(els, tab, s.Name)
			continue
		}
		fam := family.IPv4
		switch {
		case s.KeyType.Name == nftables.TypeIP6Addr.Name:
			fam = family.IPv6
		case s.KeyType.Name != nftables.TypeIPAddr.Name || !s.Interval || s.IsMap:
			return false, nil // not a set estuary writes
		}
		rs, err := intervalRanges(els)
		if err != nil {
			return false, fmt.Errorf("nftables set inet %s %s: %w", policy.TableName, s.Name, err)
		}
		tab.Sets[s.Name] = policy.Set{Name: s.Name, Family: fam, Ranges: rs}
	}
	return vmaps == 2, nil
}

func readVmap(els []nftables.SetElement, tab *policy.Table, name string) {
	m := tab.Ingress
	if name == policy.EgressMap {
		m = tab.Egress
	}
	for _, e := range els {
		m[string(bytes.TrimRight(e.Key, "\x00"))] = jumpTarget(e.Val)
	}
}

// jumpTarget reads a verdict map element's data, which google/nftables
// v0.3.0 leaves as the attributes of NFTA_DATA_VERDICT in Val: the chain of
// a jump, or "?" for any other verdict (never a chain Diff wants).
func jumpTarget(val []byte) string {
	ad, err := netlink.NewAttributeDecoder(val)
	if err != nil {
		return "?"
	}
	ad.ByteOrder = binary.BigEndian
	jump, chain := false, ""
	for ad.Next() {
		switch ad.Type() {
		case unix.NFTA_VERDICT_CODE:
			jump = int32(ad.Uint32()) == int32(expr.VerdictJump)
		case unix.NFTA_VERDICT_CHAIN:
			chain = ad.String()
		}
	}
	if ad.Err() != nil || !jump || chain == "" {
		return "?"
	}
	return chain
}
