package cniserver_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/test/infra/cniservertest"
)

// recordingGate answers every Admit with outcome and err, and records
// whether the endpoint was stored and its interface there when called.
type recordingGate struct {
	srv     func() *cniserver.Server
	backend *cniservertest.Backend
	outcome string
	err     error

	mu       sync.Mutex
	admitted []endpointstore.Endpoint
	stored   bool
	attached bool
}

func (g *recordingGate) Admit(_ context.Context, ep endpointstore.Endpoint) (string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.admitted = append(g.admitted, ep)
	_, err := g.srv().Store().Get(ep.Key)
	g.stored = err == nil
	g.attached = g.backend.Attached(ep.ContainerID, ep.IfName)
	return g.outcome, g.err
}

func gateFixture(t *testing.T, outcome string, err error) (*fixture, *recordingGate, *cniserver.Metrics) {
	t.Helper()
	m := cniserver.NewMetrics()
	f := &fixture{backend: cniservertest.NewBackend()}
	g := &recordingGate{srv: func() *cniserver.Server { return f.srv }, backend: f.backend, outcome: outcome, err: err}
	f.socket, f.state = cniservertest.Paths(t)
	f.srv = cniservertest.StartConfig(t, cniserver.Config{SocketPath: f.socket, StatePath: f.state,
		Backend: f.backend, Metrics: m, PolicyGate: g})
	f.client = dial(t, f.socket)
	return f, g, m
}

func gateCount(t *testing.T, m *cniserver.Metrics, outcome string) uint64 {
	t.Helper()
	n, _ := sample(t, m, "estuary_cni_add_policy_wait_seconds", map[string]string{"outcome": outcome})
	return n
}

// TestAddAdmitsTheStoredEndpointBeforeReplying: the gate sees the new
// endpoint with its interface built and its record stored, once per new
// attachment (a repeated ADD answered from the store is not admitted
// again), and each wait is recorded under its outcome.
func TestAddAdmitsTheStoredEndpointBeforeReplying(t *testing.T) {
	f, g, m := gateFixture(t, "pending", nil)
	if _, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: args("c1")}); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if _, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: args("c1")}); err != nil {
		t.Fatalf("repeated Add: %v", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.admitted) != 1 || g.admitted[0].PodName != "web-c1" || g.admitted[0].IPs[0] != "10.244.0.2/32" {
		t.Fatalf("admitted %+v, want c1's endpoint once", g.admitted)
	}
	if !g.stored || !g.attached {
		t.Fatalf("at admission: stored %v, attached %v; want both", g.stored, g.attached)
	}
	if n := gateCount(t, m, "pending"); n != 1 {
		t.Fatalf("pending admissions recorded: %d, want 1", n)
	}
}

// TestAddFailsClosedWhenTheGateFails: a gate that could not put the pod's
// verdicts in the kernel fails the ADD as a dataplane failure, and the
// interface and its record are rolled back, so the runtime's retry starts
// afresh.
func TestAddFailsClosedWhenTheGateFails(t *testing.T) {
	f, _, m := gateFixture(t, "", errors.New("nftables said no"))
	_, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: args("c2")})
	wantCode(t, err, codes.Internal, "nftables said no")
	if f.backend.Attached("c2", "eth0") {
		t.Fatal("the interface is left after a failed admission")
	}
	if _, err := f.srv.Store().Get(endpointstore.Key{ContainerID: "c2", IfName: "eth0"}); !errors.Is(err, endpointstore.ErrNotFound) {
		t.Fatalf("record after a failed admission: %v, want none", err)
	}
	if v := errorsOf(t, m, cniserver.CommandAdd, cniserver.ReasonDataplane); v != 1 {
		t.Fatalf("ADD dataplane errors: %v, want 1", v)
	}
	if n := gateCount(t, m, "error"); n != 1 {
		t.Fatalf("failed admissions recorded: %d, want 1", n)
	}
}
