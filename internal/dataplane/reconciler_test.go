package dataplane

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/nstest"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
	"github.com/estuary-cni/estuary/pkg/family"
)

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }
func ip(s string) netip.Addr    { return netip.MustParseAddr(s) }

// node opens a fresh namespace shaped like a node: a "physical" eth1 (one end
// of a veth pair), a pod's host veth est1 and, when the kernel has VXLAN, the
// overlay device estvx on eth1.
func node(t testing.TB) (*ops.Handle, bool) {
	t.Helper()
	h, err := ops.Open(nstest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	for _, pair := range [][2]string{{"eth1", "eth1p"}, {"est1", "est1p"}} {
		if err := h.Devices().EnsureVeth(pair[0], pair[1], 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Apply(state.Plan{AddAddrs: []state.Addr{{Dev: "eth1", Prefix: pfx("192.168.50.1/24")}}}); err != nil {
		t.Fatal(err)
	}
	_, err = h.Devices().EnsureVXLAN(ops.VXLAN{Name: "estvx", VNI: 1, Port: 4789, Parent: "eth1",
		LocalIP: ip("192.168.50.1"), MTU: 1450})
	if err == nil {
		err = h.Links().SetUp("estvx")
	}
	if err != nil {
		t.Logf("no VXLAN device, overlay objects left out: %v", err)
	}
	return h, err == nil
}

// desiredNode is the data plane of a node with one local overlay pod.
func desiredNode(vxlan bool) state.State {
	s := state.State{
		Rules: []state.Rule{
			{Priority: 1000, Table: 1000},
			{Priority: 1002, Table: 1002, Mark: 0x20, Mask: 0x20},
			{Priority: 1100, Table: 1100, Src: pfx("10.1.0.0/16"), Mask: 0x20},
			{Priority: 1000, Table: 1000, Family: family.IPv6},
		},
		Routes: []state.Route{
			{Table: 1000, Dst: pfx("10.1.0.5/32"), Dev: "est1", Scope: state.ScopeLink},
			{Table: 1000, Dst: pfx("fd00:1::5/128"), Dev: "est1"},
			{Table: 1100, Dst: pfx("10.2.0.1/32"), Type: state.RouteThrow},
		},
		Neighs: []state.Neigh{
			{Dev: "est1", IP: ip("10.1.0.5"), MAC: state.MustParseMAC("02:00:0a:01:00:05"), Permanent: true},
		},
		Addrs: []state.Addr{{Dev: "eth1", Prefix: pfx("10.2.0.254/24"), Scope: state.ScopeLink, NoPrefixRoute: true}},
	}
	if vxlan {
		s.Routes = append(s.Routes,
			state.Route{Table: 1001, Dst: pfx("10.1.0.0/16"), Dev: "estvx"},
			state.Route{Table: 1002, Dst: pfx("0.0.0.0/0"), Dev: "estvx"})
		s.Neighs = append(s.Neighs, state.Neigh{Dev: "estvx", IP: ip("10.1.0.5"), Proxy: true})
		s.FDB = []state.FDB{
			{Dev: "estvx", Dst: ip("192.168.50.2")},
			{Dev: "estvx", MAC: state.MustParseMAC("02:00:00:00:00:02"), Dst: ip("192.168.50.2")},
		}
	}
	return s
}

func read(t testing.TB, h *ops.Handle) state.State {
	t.Helper()
	s, err := h.Read(ops.Scope{FDBDevice: state.DefaultOwnership().OwnsDevice})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReconcileConvergesAndKeepsUnowned(t *testing.T) {
	h, vxlan := node(t)
	unownedRoute := state.Route{Table: state.MainTable, Dst: pfx("10.9.0.0/16"), Dev: "eth1",
		Type: state.RouteUnicast, Protocol: 4}
	unownedRule := state.Rule{Priority: 500, Table: 500, Family: family.IPv4}
	staleRoute := state.Route{Table: 1000, Dst: pfx("10.1.0.6/32"), Dev: "est1", Scope: state.ScopeLink,
		Type: state.RouteUnicast, Protocol: state.ProtocolEstuary}
	staleRule := state.Rule{Priority: 1003, Table: 1003, Family: family.IPv4}
	staleNeigh := state.Neigh{Dev: "est1", IP: ip("10.1.0.6"), Proxy: true}
	err := h.Apply(state.Plan{
		AddRoutes: []state.Route{unownedRoute, staleRoute},
		AddRules:  []state.Rule{unownedRule, staleRule},
		AddNeighs: []state.Neigh{staleNeigh},
	})
	if err != nil {
		t.Fatal(err)
	}

	r := NewReconciler(h, state.DefaultOwnership())
	desired := desiredNode(vxlan)
	plan, err := r.Reconcile(context.Background(), desired)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(plan.DelRoutes, staleRoute) || !slices.Contains(plan.DelRules, staleRule) {
		t.Errorf("plan does not delete the stale entries:\n%s", plan)
	}

	got := read(t, h)
	if !slices.Contains(got.Routes, unownedRoute) || !slices.Contains(got.Rules, unownedRule) {
		t.Errorf("unowned route or rule removed: routes %v rules %v", got.Routes, got.Rules)
	}
	if slices.Contains(got.Routes, staleRoute) || slices.Contains(got.Rules, staleRule) ||
		slices.Contains(got.Neighs, staleNeigh) {
		t.Errorf("stale owned entries survive")
	}
	if left := state.Diff(desired, got); !left.Empty() {
		t.Errorf("kernel differs from desired:\n%s", left)
	}

	again, err := r.Reconcile(context.Background(), desired)
	if err != nil || !again.Empty() {
		t.Fatalf("second reconcile: plan\n%s error %v", again, err)
	}
}

func TestReconcileRemovesEverythingOwned(t *testing.T) {
	h, vxlan := node(t)
	r := NewReconciler(h, state.DefaultOwnership())
	if _, err := r.Reconcile(context.Background(), desiredNode(vxlan)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), state.State{}); err != nil {
		t.Fatal(err)
	}
	o := state.DefaultOwnership()
	got := read(t, h)
	if owned := got.Len() - o.Unowned(got).Len(); owned != 0 {
		t.Fatalf("%d owned objects left: %+v", owned, got)
	}
}

func TestReconcileReportsWhatIsLeft(t *testing.T) {
	h, _ := node(t)
	r := NewReconciler(h, state.DefaultOwnership())
	desired := state.State{Routes: []state.Route{{Table: 1000, Dst: pfx("10.1.0.7/32"), Dev: "est7"}}}
	_, err := r.Reconcile(context.Background(), desired)
	if err == nil || !strings.Contains(err.Error(), "add route 10.1.0.7/32 table 1000 dev est7") {
		t.Fatalf("error = %v", err)
	}
}

func TestReconcileCancelled(t *testing.T) {
	h, _ := node(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewReconciler(h, state.DefaultOwnership()).Reconcile(ctx, desiredNode(false))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}

func BenchmarkReconcileNoop(b *testing.B) {
	h, _ := node(b)
	var desired state.State
	for i := range 1000 {
		desired.Routes = append(desired.Routes, state.Route{Table: 1000, Scope: state.ScopeLink, Dev: "est1",
			Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 32)})
	}
	desired.Rules = []state.Rule{{Priority: 1000, Table: 1000}}
	r := NewReconciler(h, state.DefaultOwnership())
	if _, err := r.Reconcile(context.Background(), desired); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		plan, err := r.Reconcile(context.Background(), desired)
		if err != nil || !plan.Empty() {
			b.Fatalf("no-op reconcile: plan\n%s error %v", plan, err)
		}
	}
}
