package daemon

// Seeing the policy table's verdicts: the counters its rules count into,
// exported as metrics on scrape, and the drops its log rules send to the
// netlink log, kept in a bounded ring that /debug/policy/drops serves and
// `estuary-daemon policy-drops` prints (policydrops.go).

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/estuary-cni/estuary/internal/daemon/datapath"
	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/internal/policydrops"
)

// dropRingSize is how many recent drops the daemon keeps.
const dropRingSize = 1024

// counterTable is the policy table with its counters; ops.Policy is one.
type counterTable interface {
	datapath.PolicyTable
	ReadCounters() (map[string]policy.Count, error)
}

// dropSource delivers the drops the table logs; ops.DropLog is one.
type dropSource interface {
	Run(ctx context.Context, fn func(policydrops.Drop)) error
	Lost() uint64
	Close() error
}

// policyVerdicts sits between the policy part and the table: it learns
// from each ruleset written which counter stands for which policy object,
// and keeps the logged drops.
type policyVerdicts struct {
	table counterTable
	node  string
	ring  *policydrops.Ring

	mu       sync.Mutex
	counters map[string]policy.Counter // of the last ruleset written
	// log is nil when the netlink log could not be read, and logErr says
	// why.
	log    dropSource
	logErr error
}

var _ datapath.PolicyTable = (*policyVerdicts)(nil)

func newPolicyVerdicts(table counterTable, node string) *policyVerdicts {
	return &policyVerdicts{table: table, node: node, ring: policydrops.NewRing(dropRingSize),
		counters: map[string]policy.Counter{}}
}

// Ensure writes want (without its log rules when the node's netlink log
// cannot be read) and, once written, names its counters.
func (v *policyVerdicts) Ensure(want policy.Ruleset) (policy.Ops, error) {
	v.mu.Lock()
	noLog := v.logErr != nil
	v.mu.Unlock()
	if noLog {
		want = want.WithoutDropLog()
	}
	o, err := v.table.Ensure(want)
	if err != nil {
		return o, err
	}
	m := make(map[string]policy.Counter, len(want.Counters))
	for _, c := range want.Counters {
		m[c.Name] = c
	}
	v.mu.Lock()
	v.counters = m
	v.mu.Unlock()
	return o, nil
}

// Read reads the table back.
func (v *policyVerdicts) Read() (policy.Table, error) { return v.table.Read() }

// Apply writes o (an admission's hold, which adds no counter).
func (v *policyVerdicts) Apply(o policy.Ops) error { return v.table.Apply(o) }

// listen reads src's drops into the ring until ctx ends; a nil src (err
// says why) leaves the ring empty and the endpoint saying why.
func (v *policyVerdicts) listen(ctx context.Context, src dropSource, err error) {
	v.mu.Lock()
	v.log, v.logErr = src, err
	v.mu.Unlock()
	if src == nil {
		log.Error(err, "policy drops are not logged on this node")
		return
	}
	go func() {
		if err := src.Run(ctx, v.add); err != nil {
			log.Error(err, "policy drop log stopped")
		}
	}()
}

// add keeps d, naming the policy a log prefix had to stand a counter
// for.
func (v *policyVerdicts) add(d policydrops.Drop) {
	if ref, ok := strings.CutPrefix(d.Policy, "#"); ok {
		v.mu.Lock()
		if c, known := v.counters[ref]; known {
			d.Policy = c.Ref()
		}
		v.mu.Unlock()
	}
	v.ring.Add(d)
}

// close stops reading the log.
func (v *policyVerdicts) close() {
	if v == nil {
		return
	}
	v.mu.Lock()
	src := v.log
	v.mu.Unlock()
	if src != nil {
		_ = src.Close()
	}
}

// report is the ring's drops, or why there are none to read.
func (v *policyVerdicts) report() (policydrops.Report, error) {
	v.mu.Lock()
	err := v.logErr
	v.mu.Unlock()
	if err != nil {
		return policydrops.Report{}, err
	}
	return v.ring.Report(v.node), nil
}

// serveDrops writes the node's recent drops as a policydrops.Report,
// naming each drop's pod by its host veth from eps when it can.
func serveDrops(v *policyVerdicts, eps endpointStore) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if v == nil {
			http.Error(w, "network policy is off on this node (--network-policy=false)", http.StatusNotFound)
			return
		}
		r, err := v.report()
		if err != nil {
			http.Error(w, "policy drops are not logged on this node: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		namePods(r.Drops, eps)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(r)
	}
}

// namePods fills the pod of each drop whose host veth is an endpoint of
// eps; a store that cannot be read leaves them unnamed.
func namePods(drops []policydrops.Drop, eps endpointStore) {
	if eps == nil || len(drops) == 0 {
		return
	}
	list, err := eps.List()
	if err != nil {
		return
	}
	pods := make(map[string]string, len(list))
	for _, e := range list {
		if e.PodName != "" {
			pods[hostVeth(e.Key)] = e.PodNamespace + "/" + e.PodName
		}
	}
	for i := range drops {
		if drops[i].Pod == "" {
			drops[i].Pod = pods[drops[i].HostVeth]
		}
	}
}

var (
	policyPacketsDesc = prometheus.NewDesc("estuary_policy_packets_total",
		"Packets the node's policy table decided, by policy object (kind np, cnp, ... or isolation; policy namespace/name "+
			"for a NetworkPolicy, name otherwise, empty for isolation), direction and verdict (accept, drop, pass).",
		[]string{"kind", "policy", "direction", "verdict"}, nil)
	policyBytesDesc = prometheus.NewDesc("estuary_policy_bytes_total",
		"Bytes of the packets estuary_policy_packets_total counts.",
		[]string{"kind", "policy", "direction", "verdict"}, nil)
	policyDropLogLostDesc = prometheus.NewDesc("estuary_policy_drop_log_lost_total",
		"Logged drops the daemon could not read: overflows of its netlink log socket and messages that did not decode.",
		nil, nil)
)

// verdictCollector exports the table's counters, read on each scrape.
type verdictCollector struct{ v *policyVerdicts }

// Describe implements prometheus.Collector.
func (c verdictCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- policyPacketsDesc
	ch <- policyBytesDesc
	ch <- policyDropLogLostDesc
}

// Collect implements prometheus.Collector. A counter the last ruleset
// does not name (being deleted) is left out; a table that cannot be read
// is logged and exports no counters.
func (c verdictCollector) Collect(ch chan<- prometheus.Metric) {
	v := c.v
	v.mu.Lock()
	src := v.log
	v.mu.Unlock()
	if src != nil {
		ch <- prometheus.MustNewConstMetric(policyDropLogLostDesc, prometheus.CounterValue, float64(src.Lost()))
	}
	counts, err := v.table.ReadCounters()
	if err != nil {
		log.Error(err, "read the policy table's counters")
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for name, n := range counts {
		k, ok := v.counters[name]
		if !ok {
			continue
		}
		ch <- prometheus.MustNewConstMetric(policyPacketsDesc, prometheus.CounterValue, float64(n.Packets),
			k.Kind, k.Policy, k.Direction, k.Verdict)
		ch <- prometheus.MustNewConstMetric(policyBytesDesc, prometheus.CounterValue, float64(n.Bytes),
			k.Kind, k.Policy, k.Direction, k.Verdict)
	}
}
