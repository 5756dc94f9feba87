package dataplane

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/test/infra/nstest"
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
	if err := h.Apply(desired.Plan{AddAddrs: []desired.Addr{{Dev: "eth1", Prefix: pfx("192.168.50.1/24")}}}); err != nil {
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
func desiredNode(vxlan bool) desired.State {
	s := desired.State{
		Rules: []desired.Rule{
			{Priority: 1000, Table: 1000},
			{Priority: 1002, Table: 1002, Mark: 0x20, Mask: 0x20},
			{Priority: 1100, Table: 1100, Src: pfx("10.1.0.0/16"), Mask: 0x20},
			{Priority: 1000, Table: 1000, Family: family.IPv6},
		},
		Routes: []desired.Route{
			{Table: 1000, Dst: pfx("10.1.0.5/32"), Dev: "est1", Scope: desired.ScopeLink},
			{Table: 1000, Dst: pfx("fd00:1::5/128"), Dev: "est1"},
			{Table: 1100, Dst: pfx("10.2.0.1/32"), Type: desired.RouteThrow},
		},
		Neighs: []desired.Neigh{
			{Dev: "est1", IP: ip("10.1.0.5"), MAC: desired.MustParseMAC("02:00:0a:01:00:05"), Permanent: true},
		},
		Addrs: []desired.Addr{{Dev: "eth1", Prefix: pfx("10.2.0.254/24"), Scope: desired.ScopeLink, NoPrefixRoute: true}},
	}
	if vxlan {
		s.Routes = append(s.Routes,
			desired.Route{Table: 1001, Dst: pfx("10.1.0.0/16"), Dev: "estvx"},
			desired.Route{Table: 1002, Dst: pfx("0.0.0.0/0"), Dev: "estvx"})
		s.Neighs = append(s.Neighs, desired.Neigh{Dev: "estvx", IP: ip("10.1.0.5"), Proxy: true})
		s.FDB = []desired.FDB{
			{Dev: "estvx", Dst: ip("192.168.50.2")},
			{Dev: "estvx", MAC: desired.MustParseMAC("02:00:00:00:00:02"), Dst: ip("192.168.50.2")},
		}
	}
	return s
}

func read(t testing.TB, h *ops.Handle) desired.State {
	t.Helper()
	s, err := h.Read(ops.Scope{FDBDevice: desired.DefaultOwnership().OwnsDevice})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReconcileConvergesAndKeepsUnowned(t *testing.T) {
	h, vxlan := node(t)
	unownedRoute := desired.Route{Table: desired.MainTable, Dst: pfx("10.9.0.0/16"), Dev: "eth1",
		Type: desired.RouteUnicast, Protocol: 4}
	unownedRule := desired.Rule{Priority: 500, Table: 500, Family: family.IPv4}
	staleRoute := desired.Route{Table: 1000, Dst: pfx("10.1.0.6/32"), Dev: "est1", Scope: desired.ScopeLink,
		Type: desired.RouteUnicast, Protocol: desired.ProtocolEstuary}
	staleRule := desired.Rule{Priority: 1003, Table: 1003, Family: family.IPv4}
	staleNeigh := desired.Neigh{Dev: "est1", IP: ip("10.1.0.6"), Proxy: true}
	err := h.Apply(desired.Plan{
		AddRoutes: []desired.Route{unownedRoute, staleRoute},
		AddRules:  []desired.Rule{unownedRule, staleRule},
		AddNeighs: []desired.Neigh{staleNeigh},
	})
	if err != nil {
		t.Fatal(err)
	}

	r := NewReconciler(h, desired.DefaultOwnership())
	want := desiredNode(vxlan)
	plan, err := r.Reconcile(context.Background(), want)
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
	if left := desired.Diff(want, got); !left.Empty() {
		t.Errorf("kernel differs from desired:\n%s", left)
	}

	again, err := r.Reconcile(context.Background(), want)
	if err != nil || !again.Empty() {
		t.Fatalf("second reconcile: plan\n%s error %v", again, err)
	}
}

func TestReconcileRemovesEverythingOwned(t *testing.T) {
	h, vxlan := node(t)
	r := NewReconciler(h, desired.DefaultOwnership())
	if _, err := r.Reconcile(context.Background(), desiredNode(vxlan)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(context.Background(), desired.State{}); err != nil {
		t.Fatal(err)
	}
	o := desired.DefaultOwnership()
	got := read(t, h)
	if owned := got.Len() - o.Unowned(got).Len(); owned != 0 {
		t.Fatalf("%d owned objects left: %+v", owned, got)
	}
}

func TestReconcileReportsWhatIsLeft(t *testing.T) {
	h, _ := node(t)
	r := NewReconciler(h, desired.DefaultOwnership())
	want := desired.State{Routes: []desired.Route{{Table: 1000, Dst: pfx("10.1.0.7/32"), Dev: "est7"}}}
	_, err := r.Reconcile(context.Background(), want)
	if err == nil || !strings.Contains(err.Error(), "add route 10.1.0.7/32 table 1000 dev est7") {
		t.Fatalf("error = %v", err)
	}
}

func TestReconcileCancelled(t *testing.T) {
	h, _ := node(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := NewReconciler(h, desired.DefaultOwnership()).Reconcile(ctx, desiredNode(false))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}

func BenchmarkReconcileNoop(b *testing.B) {
	h, _ := node(b)
	var want desired.State
	for i := range 1000 {
		want.Routes = append(want.Routes, desired.Route{Table: 1000, Scope: desired.ScopeLink, Dev: "est1",
			Dst: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 32)})
	}
	want.Rules = []desired.Rule{{Priority: 1000, Table: 1000}}
	r := NewReconciler(h, desired.DefaultOwnership())
	if _, err := r.Reconcile(context.Background(), want); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		plan, err := r.Reconcile(context.Background(), want)
		if err != nil || !plan.Empty() {
			b.Fatalf("no-op reconcile: plan\n%s error %v", plan, err)
		}
	}
}
