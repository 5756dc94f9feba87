package ops

// The policy table's verdict counters and drop log (policy/verdicts.go):
// named counter objects the pod chains' rules count into, the named limit
// object the log rules share, and the expressions that use them.

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

// dropLogSnaplen is how much of a dropped packet the kernel copies to the
// log: the IPv6 header, a few extension headers and the ports.
const dropLogSnaplen = 128

// verdictExprs are a rule's statements before its verdict: the rate limit
// and log of a log rule, the counter of a counting rule.
func verdictExprs(r policy.NFRule) []expr.Any {
	var es []expr.Any
	if r.LogPrefix != "" {
		es = append(es,
			&expr.Objref{Type: int(nftables.ObjTypeLimit), Name: policy.DropLogLimit},
			&expr.Log{Key: 1<<unix.NFTA_LOG_GROUP | 1<<unix.NFTA_LOG_PREFIX | 1<<unix.NFTA_LOG_SNAPLEN,
				Group: policy.DropLogGroup, Snaplen: dropLogSnaplen, Data: []byte(r.LogPrefix)})
	}
	if r.Counter != "" {
		es = append(es, &expr.Objref{Type: int(nftables.ObjTypeCounter), Name: r.Counter})
	}
	return es
}

// dropLogLimit is the table's limit object the log rules share.
func dropLogLimit(t *nftables.Table) *nftables.NamedObj {
	return &nftables.NamedObj{Table: t, Name: policy.DropLogLimit, Type: nftables.ObjTypeLimit,
		Obj: &expr.Limit{Type: expr.LimitTypePkts, Rate: policy.DropLogRate, Unit: expr.LimitTimeSecond,
			Burst: policy.DropLogBurst}}
}

func counterObj(t *nftables.Table, name string) *nftables.NamedObj {
	return &nftables.NamedObj{Table: t, Name: name, Type: nftables.ObjTypeCounter, Obj: &expr.Counter{}}
}

// addCounters queues the counters a batch adds (before the rules that
// use them).
func (p *policyBatch) addCounters(names []string) {
	for _, n := range names {
		p.conn.AddObj(counterObj(p.table, n))
	}
}

// delCounters queues the deletion of counters no rule uses any more
// (after the chains that used them are flushed).
func (p *policyBatch) delCounters(names []string) {
	for _, n := range names {
		p.conn.DeleteObject(counterObj(p.table, n))
	}
}

// readObjects reads the table's counters' names into tab and says whether
// its objects are estuary's: counters, and the drop log's limit.
func (p *Policy) readObjects(tab *policy.Table) (bool, error) {
	objs, err := p.conn.GetNamedObjects(p.table)
	if err != nil {
		return false, fmt.Errorf("list objects of nftables table inet %s: %w", policy.TableName, err)
	}
	limit := false
	for _, o := range objs {
		n, ok := o.(*nftables.NamedObj)
		switch {
		case !ok || n.Table == nil || n.Table.Name != policy.TableName:
			continue
		case n.Type == nftables.ObjTypeCounter:
			tab.Counters[n.Name] = true
		case n.Type == nftables.ObjTypeLimit && n.Name == policy.DropLogLimit:
			limit = true
		default:
			return false, nil
		}
	}
	return limit, nil
}

// ReadCounters reads what the table's counters have counted, by name;
// empty when there is no table.
func (p *Policy) ReadCounters() (map[string]policy.Count, error) {
	out := map[string]policy.Count{}
	ts, err := p.conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return nil, fmt.Errorf("list nftables tables: %w", err)
	}
	present := false
	for _, t := range ts {
		present = present || t.Name == policy.TableName
	}
	if !present {
		return out, nil
	}
	objs, err := p.conn.GetNamedObjects(p.table)
	if err != nil {
		return nil, fmt.Errorf("read the counters of nftables table inet %s: %w", policy.TableName, err)
	}
	for _, o := range objs {
		n, ok := o.(*nftables.NamedObj)
		if !ok || n.Type != nftables.ObjTypeCounter || n.Table == nil || n.Table.Name != policy.TableName {
			continue
		}
		if c, ok := n.Obj.(*expr.Counter); ok {
			out[n.Name] = policy.Count{Packets: c.Packets, Bytes: c.Bytes}
		}
	}
	return out, nil
}
