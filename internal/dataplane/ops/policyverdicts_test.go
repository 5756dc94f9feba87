package ops

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/internal/policydrops"
)

// verdictWait bounds how long a test polls for a counter or a logged drop.
const verdictWait = 5 * time.Second

// drops collects what a DropLog delivers.
type drops struct {
	mu  sync.Mutex
	got []policydrops.Drop
}

func (d *drops) add(x policydrops.Drop) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.got = append(d.got, x)
}

// await polls until a collected drop satisfies ok.
func (d *drops) await(t *testing.T, what string, ok func(policydrops.Drop) bool) policydrops.Drop {
	t.Helper()
	deadline := time.Now().Add(verdictWait)
	for time.Now().Before(deadline) {
		d.mu.Lock()
		for _, x := range d.got {
			if ok(x) {
				d.mu.Unlock()
				return x
			}
		}
		d.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	t.Fatalf("no logged drop of %s within %v; got %+v", what, verdictWait, d.got)
	return policydrops.Drop{}
}

// counterOf names the counter of rs for an object, direction and verdict.
func counterOf(t *testing.T, rs policy.Ruleset, kind, pol, dir, verdict string) string {
	t.Helper()
	for _, c := range rs.Counters {
		if c.Kind == kind && c.Policy == pol && c.Direction == dir && c.Verdict == verdict {
			return c.Name
		}
	}
	t.Fatalf("ruleset has no counter %s %s %s %s: %+v", kind, pol, dir, verdict, rs.Counters)
	return ""
}

// awaitCount polls the table until counter name has counted at least
// least packets.
func awaitCount(t *testing.T, p *Policy, what, name string, least uint64) {
	t.Helper()
	deadline := time.Now().Add(verdictWait)
	var got policy.Count
	for time.Now().Before(deadline) {
		cs, err := p.ReadCounters()
		if err != nil {
			t.Fatal(err)
		}
		if got = cs[name]; got.Packets >= least && got.Bytes > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: counter %s counted %+v within %v, want at least %d packets", what, name, got, verdictWait, least)
}

// TestPolicyVerdictCountersAndDropLog: b's ingress admits TCP 80 from a
// (a NetworkPolicy) and an admin Deny drops a's TCP 9; the rest is dropped
// by isolation. Each verdict counts into its object's counter, and each
// drop reaches the netlink log listener with its direction, host veth,
// policy, addresses and ports, over IPv4 and IPv6.
func TestPolicyVerdictCountersAndDropLog(t *testing.T) {
	n := newPolicyNode(t, 2)
	a, b := n.pods[0], n.pods[1]
	log, err := OpenDropLog(n.host)
	if err != nil {
		t.Skipf("this kernel's netlink log (nfnetlink_log) cannot be read: %v", err)
	}
	t.Cleanup(func() { _ = log.Close() })
	var got drops
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- log.Run(ctx, got.add) }()
	awaitBound(t, log)
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("drop log: %v", err)
		}
	})
	listenTCP(t, b.ns, b.v4, 80)
	in := isolatedIngress(policy.Rule{ID: "np/ns/web/ingress/0", Peers: peersOf(pod(a), pod6(a)), Ports: tcpPort(80)})
	in.Admin = []policy.AdminRule{{Rule: policy.Rule{ID: "cnp/deny-nine/ingress/0", Peers: peersOf(pod(a), pod6(a)),
		Ports: tcpPort(9)}, Action: policy.Deny}}
	m := policy.Node{Endpoints: []policy.Endpoint{{HostVeth: b.veth, Ingress: in}}}
	n.ensure(t, m)
	rs, err := policy.Compile(m)
	if err != nil {
		t.Fatal(err)
	}

	expectTCP(t, "allowed port", a.ns, b.v4, 80, true)
	awaitCount(t, n.pol, "allowed port", counterOf(t, rs, "np", "ns/web", "ingress", "accept"), 1)

	expectTCP(t, "isolation", a.ns, b.v4, 8080, false)
	awaitCount(t, n.pol, "isolation", counterOf(t, rs, policy.KindIsolation, "", "ingress", "drop"), 1)
	d := got.await(t, "the isolation drop", func(d policydrops.Drop) bool { return d.DstPort == 8080 })
	want := policydrops.Drop{Time: d.Time, Direction: "ingress", HostVeth: b.veth, Protocol: "tcp",
		Src: a.v4.String(), Dst: b.v4.String(), SrcPort: d.SrcPort, DstPort: 8080}
	if d != want || d.SrcPort == 0 || time.Since(d.Time) > time.Minute {
		t.Errorf("isolation drop logged as %+v, want %+v with a source port and a recent time", d, want)
	}

	expectTCP(t, "admin deny over IPv6", a.ns, b.v6, 9, false)
	awaitCount(t, n.pol, "admin deny", counterOf(t, rs, "cnp", "deny-nine", "ingress", "drop"), 1)
	d = got.await(t, "the admin deny", func(d policydrops.Drop) bool { return d.DstPort == 9 })
	if d.Policy != "cnp/deny-nine" || d.Src != a.v6.String() || d.Dst != b.v6.String() || d.HostVeth != b.veth ||
		d.Direction != "ingress" {
		t.Errorf("admin deny logged as %+v", d)
	}
	if log.Lost() != 0 {
		t.Errorf("the listener lost %d messages", log.Lost())
	}
}

// TestPolicyCountersFollowTheRules: a counter exists while a rule counts
// into it; removing the policy deletes its counter in the same batch, and
// the read-back of an unchanged table writes nothing.
func TestPolicyCountersFollowTheRules(t *testing.T) {
	n := newPolicyNode(t, 2)
	a, b := n.pods[0], n.pods[1]
	deny := policy.AdminRule{Rule: policy.Rule{ID: "cnp/deny-a/ingress/0", Peers: peersOf(pod(a))}, Action: policy.Deny}
	with := policy.Node{Endpoints: []policy.Endpoint{{HostVeth: b.veth, Ingress: policy.Direction{Admin: []policy.AdminRule{deny}}}}}
	n.ensure(t, with)
	rs, _ := policy.Compile(with)
	name := counterOf(t, rs, "cnp", "deny-a", "ingress", "drop")
	if cs, err := n.pol.ReadCounters(); err != nil || len(cs) != 1 {
		t.Fatalf("counters %v, %v; want %s alone", cs, err, name)
	}
	o, err := n.pol.Ensure(policy.Ruleset{})
	if err != nil {
		t.Fatal(err)
	}
	if len(o.DelCounters) != 1 || o.DelCounters[0] != name {
		t.Errorf("removing the policy:\n%s", o)
	}
	if cs, err := n.pol.ReadCounters(); err != nil || len(cs) != 0 {
		t.Fatalf("counters after the policy is gone: %v, %v", cs, err)
	}
}

// awaitBound waits until the log listens on its group, so that no drop
// the test causes is logged to no one.
func awaitBound(t *testing.T, log *DropLog) {
	t.Helper()
	select {
	case <-log.Bound():
	case <-time.After(verdictWait):
		t.Fatalf("the drop log did not bind its group within %v", verdictWait)
	}
}

// count is how many drops were collected.
func (d *drops) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got)
}

// TestPolicyDropLogIsRateLimited: a flood of dropped datagrams is dropped
// and counted whole, but reaches the log listener only at the table's
// shared limit: at any time at most its burst plus its rate per second
// since the flood began.
func TestPolicyDropLogIsRateLimited(t *testing.T) {
	const flood = 3000
	n := newPolicyNode(t, 2)
	a, b := n.pods[0], n.pods[1]
	log, err := OpenDropLog(n.host)
	if err != nil {
		t.Skipf("this kernel's netlink log (nfnetlink_log) cannot be read: %v", err)
	}
	t.Cleanup(func() { _ = log.Close() })
	var got drops
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = log.Run(ctx, got.add) }()
	awaitBound(t, log)
	m := policy.Node{Endpoints: []policy.Endpoint{{HostVeth: b.veth, Ingress: isolatedIngress()}}}
	n.ensure(t, m)
	rs, _ := policy.Compile(m)

	start := time.Now()
	var c net.Conn
	if err := nsrun.Do(a.ns, func() (err error) {
		c, err = net.Dial("udp", netip.AddrPortFrom(b.v4, 7).String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	for range flood {
		if _, err := c.Write([]byte("flood")); err != nil {
			t.Fatal(err)
		}
	}
	awaitCount(t, n.pol, "flood", counterOf(t, rs, policy.KindIsolation, "", "ingress", "drop"), flood)
	deadline := time.Now().Add(verdictWait)
	for got.count() < policy.DropLogBurst && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	logged, elapsed := got.count(), time.Since(start)
	bound := policy.DropLogBurst + policy.DropLogRate*(1+int(elapsed/time.Second))
	t.Logf("%d of %d dropped datagrams logged in %v (bound %d)", logged, flood, elapsed, bound)
	if logged < policy.DropLogBurst || logged > bound {
		t.Errorf("%d of %d dropped datagrams logged in %v, want between the burst %d and %d", logged, flood, elapsed,
			policy.DropLogBurst, bound)
	}
}
