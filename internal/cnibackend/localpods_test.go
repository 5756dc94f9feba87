package cnibackend

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// endpoints is a settable endpoint list with a settable busy set.
type endpoints struct {
	mu   sync.Mutex
	eps  []endpointstore.Endpoint
	busy []endpointstore.Key
}

func (e *endpoints) List() ([]endpointstore.Endpoint, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.eps), nil
}

func (e *endpoints) Busy() []endpointstore.Key {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.busy)
}

func (e *endpoints) set(eps []endpointstore.Endpoint, busy ...endpointstore.Key) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.eps, e.busy = eps, busy
}

func recorded(a cniserver.Attachment, ips ...string) endpointstore.Endpoint {
	return endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: a.ContainerID, IfName: a.IfName}, Netns: a.Netns, IPs: ips}
}

// newLocalPods is the local-pods part of the namespace host over eps.
func newLocalPods(tb testing.TB, host string, eps *endpoints) *LocalPods {
	tb.Helper()
	table, err := podnet.NewLocalPods(host)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(table.Close)
	return NewLocalPods(table, eps, eps.Busy)
}

// desiredOf is table 1000 as Reconcile derives it from eps, busy and a
// kernel whose veths exist says, with the endpoints it skips and reports.
func desiredOf(eps []endpointstore.Endpoint, busy []endpointstore.Key, exists func(string) bool) (desired.State, []endpointstore.Key, error) {
	in := localPodsOf(eps, busy)
	busySet := map[string]bool{}
	for _, dev := range in.busy {
		busySet[dev] = true
	}
	want, veths := podnet.DesiredLocalPods(in.pods, busySet, exists)
	missing, err := in.result(veths)
	return want, missing, err
}

// localRoute is a's route in table 1000 through dev.
func localRoute(dev, a string) desired.Route {
	return desired.Route{Table: desired.TableLocalPods, Dst: netip.PrefixFrom(netip.MustParseAddr(a), netip.MustParseAddr(a).BitLen()),
		Dev: dev, Scope: desired.ScopeLink, Protocol: desired.ProtocolEstuary}
}

func localPodsRule(f family.Family) desired.Rule {
	return desired.Rule{Priority: desired.PriorityLocalPods, Table: desired.TableLocalPods, Family: f}
}

func table1000(t *testing.T, host string) string {
	t.Helper()
	return ipCmd(t, host, "route", "show", "table", "1000")
}

// TestLocalPodsReconcilesTable1000: the loop's local-pods writer restores a
// route deleted by hand, removes the route of a veth the store no longer
// names, leaves the route of an attachment in flight alone, skips and
// reports an endpoint without a veth, and never deletes the shared rule.
func TestLocalPodsReconcilesTable1000(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a, _ := e.pod(t, "a", "eth0", addr("10.0.0.5/24"))
	b, _ := e.pod(t, "b", "eth0", addr("10.0.0.6/24"))
	e.add(t, a)
	e.add(t, b)
	eps := &endpoints{}
	eps.set([]endpointstore.Endpoint{recorded(a, "10.0.0.5/32"), recorded(b, "10.0.0.6/32")})
	lp := newLocalPods(t, e.host, eps)
	reconcile := func(step string) (desired.Plan, []endpointstore.Key) {
		t.Helper()
		plan, missing, err := lp.Reconcile(ctx)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		return plan, missing
	}
	routeA := "10.0.0.5 dev " + hostVeth(a)
	routeB := "10.0.0.6 dev " + hostVeth(b)

	if plan, _ := reconcile("in line"); !plan.Empty() {
		t.Errorf("in line with the store: plan\n%s", plan)
	}

	ipCmd(t, e.host, "route", "del", "10.0.0.5/32", "table", "1000")
	if plan, _ := reconcile("route deleted by hand"); len(plan.AddRoutes) != 1 || plan.Len() != 1 {
		t.Errorf("route deleted by hand: plan\n%s", plan)
	}
	if out := table1000(t, e.host); !strings.Contains(out, routeA) {
		t.Errorf("route of a not restored:\n%s", out)
	}

	// a is in flight (its record gone, its Del not finished): left alone.
	eps.set([]endpointstore.Endpoint{recorded(b, "10.0.0.6/32")}, recorded(a).Key)
	if plan, _ := reconcile("a busy"); !plan.Empty() {
		t.Errorf("a busy: plan\n%s", plan)
	}
	if out := table1000(t, e.host); !strings.Contains(out, routeA) {
		t.Errorf("route of the busy a deleted:\n%s", out)
	}

	// No longer busy and not recorded: its route goes, b's stays.
	ghost := endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: "c-ghost", IfName: "eth0"}, IPs: []string{"10.0.0.9/32"}}
	eps.set([]endpointstore.Endpoint{recorded(b, "10.0.0.6/32"), ghost})
	plan, missing := reconcile("a not recorded")
	if len(plan.DelRoutes) != 1 || plan.DelRoutes[0].Dev != hostVeth(a) || plan.Len() != 1 {
		t.Errorf("a not recorded: plan\n%s", plan)
	}
	if !slices.Equal(missing, []endpointstore.Key{ghost.Key}) {
		t.Errorf("missing = %v, want the endpoint without a veth %v", missing, ghost.Key)
	}
	out := table1000(t, e.host)
	if strings.Contains(out, routeA) || !strings.Contains(out, routeB) {
		t.Errorf("table 1000 after a's record went:\n%s", out)
	}

	eps.set(nil)
	reconcile("store empty")
	if out := ipCmd(t, e.host, "rule", "show"); !strings.Contains(out, "1000:\tfrom all lookup 1000") {
		t.Errorf("shared rule deleted:\n%s", out)
	}
	if out := table1000(t, e.host); strings.TrimSpace(out) != "" {
		t.Errorf("table 1000 with an empty store:\n%s", out)
	}
}

// TestDesiredLocalPods: the store's endpoints become table 1000; one whose
// recorded address does not parse is reported, a busy one left out, one
// without a veth skipped and reported.
func TestDesiredLocalPods(t *testing.T) {
	v4 := endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: "c1", IfName: "eth0"}, IPs: []string{"10.0.0.5/24"}}
	v6 := endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: "c2", IfName: "eth0"}, IPs: []string{"fd00::5/64"}}
	bad := endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: "c3", IfName: "eth0"}, IPs: []string{"not-an-ip"}}
	busy := endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: "c4", IfName: "eth0"}, IPs: []string{"10.0.0.7/24"}}
	all := func(string) bool { return true }
	want, missing, err := desiredOf([]endpointstore.Endpoint{v4, v6, bad, busy}, []endpointstore.Key{busy.Key}, all)
	if err == nil || !strings.Contains(err.Error(), "c3") || !strings.Contains(err.Error(), "not-an-ip") {
		t.Errorf("error = %v, want one naming endpoint c3 and its address", err)
	}
	if len(missing) != 0 {
		t.Errorf("missing = %v", missing)
	}
	wantRoutes := []desired.Route{localRoute(hostVethOf(v4.Key), "10.0.0.5"), localRoute(hostVethOf(v6.Key), "fd00::5")}
	if !slices.Equal(want.Routes, wantRoutes) {
		t.Errorf("routes = %v, want %v", want.Routes, wantRoutes)
	}
	if !slices.Equal(want.Rules, []desired.Rule{localPodsRule(family.IPv4), localPodsRule(family.IPv6)}) {
		t.Errorf("rules = %v", want.Rules)
	}
	none := func(string) bool { return false }
	want, missing, _ = desiredOf([]endpointstore.Endpoint{v4}, nil, none)
	if want.Len() != 0 || !slices.Equal(missing, []endpointstore.Key{v4.Key}) {
		t.Errorf("without veths: desired %v, missing %v", want, missing)
	}
}

// BenchmarkLocalPodsNoop measures the local-pods part of every loop pass on
// a node with 250 pods (the benchmark node of make bench-cni): read the
// kernel, list the endpoint store and the links, diff, nothing to apply.
func BenchmarkLocalPodsNoop(b *testing.B) {
	host := nstest.New(b)
	var batch strings.Builder
	var eps []endpointstore.Endpoint
	for i := range 250 {
		k := endpointstore.Key{ContainerID: fmt.Sprintf("c%03d", i), IfName: "eth0"}
		dev, ip := hostVethOf(k), netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
		fmt.Fprintf(&batch, "link add %s type veth peer name p%03d\nlink set %s up\nroute add %s/32 dev %s scope link proto 229 table 1000\n",
			dev, i, dev, ip, dev)
		eps = append(eps, endpointstore.Endpoint{Key: k, IPs: []string{ip.String() + "/32"}})
	}
	batch.WriteString("rule add priority 1000 lookup 1000\n")
	cmd := exec.Command("ip", "-n", filepath.Base(host), "-batch", "-")
	cmd.Stdin = strings.NewReader(batch.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("ip -batch: %v\n%s", err, out)
	}
	list := &endpoints{}
	list.set(eps)
	lp := newLocalPods(b, host, list)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		plan, missing, err := lp.Reconcile(ctx)
		if err != nil || !plan.Empty() || len(missing) != 0 {
			b.Fatalf("no-op: plan\n%s missing %v error %v", plan, missing, err)
		}
	}
}
