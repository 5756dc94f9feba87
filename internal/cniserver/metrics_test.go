package cniserver_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/test/infra/cniservertest"
)

// metricsFixture is a fixture whose server records its metrics.
func metricsFixture(t *testing.T) (*fixture, *cniserver.Metrics) {
	t.Helper()
	m := cniserver.NewMetrics()
	f := &fixture{backend: cniservertest.NewBackend()}
	f.socket, f.state = cniservertest.Paths(t)
	f.srv = cniservertest.StartConfig(t, cniserver.Config{SocketPath: f.socket, StatePath: f.state,
		Backend: f.backend, Metrics: m})
	f.client = dial(t, f.socket)
	return f, m
}

// sample reads the series of the family name whose labels include want:
// its histogram's sample count and its counter's value.
func sample(t *testing.T, m *cniserver.Metrics, name string, want map[string]string) (count uint64, value float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, s := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue series
				}
			}
			return s.GetHistogram().GetSampleCount(), s.GetCounter().GetValue()
		}
	}
	t.Fatalf("no %s%v", name, want)
	return 0, 0
}

func durationCount(t *testing.T, m *cniserver.Metrics, command, result string) uint64 {
	t.Helper()
	n, _ := sample(t, m, "estuary_cni_request_duration_seconds", map[string]string{"command": command, "result": result})
	return n
}

func errorsOf(t *testing.T, m *cniserver.Metrics, command string, reason cniserver.Reason) float64 {
	t.Helper()
	_, v := sample(t, m, "estuary_cni_request_errors_total", map[string]string{"command": command, "reason": string(reason)})
	return v
}

// TestMetricsCountEveryCommandByResultAndReason: each ADD, DEL, CHECK and GC
// is observed once in the duration histogram under its result, and each
// failure is counted once under the reason its error path gives.
func TestMetricsCountEveryCommandByResultAndReason(t *testing.T) {
	f, m := metricsFixture(t)
	if _, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: args("c1")}); err != nil {
		t.Fatal(err)
	}
	bad := args("c2")
	bad.Ifname = "eth0/../../x"
	_, err := f.client.Add(ctx(t), &cniv1.AddRequest{Args: bad})
	wantCode(t, err, codes.InvalidArgument, "ifname")
	f.backend.FailAdd = cniserver.WithReason(cniserver.ReasonIPAMTimeout, errors.New("no addresses within 30s"))
	_, err = f.client.Add(ctx(t), &cniv1.AddRequest{Args: args("c3")})
	wantCode(t, err, codes.Internal, "no addresses within 30s")
	f.backend.FailAdd = errors.New("something unexpected")
	_, err = f.client.Add(ctx(t), &cniv1.AddRequest{Args: args("c4")})
	wantCode(t, err, codes.Internal, "something unexpected")
	_, err = f.client.Check(ctx(t), &cniv1.CheckRequest{Args: args("c9")})
	wantCode(t, err, codes.NotFound, "c9/eth0")
	if _, err := f.client.Check(ctx(t), &cniv1.CheckRequest{Args: args("c1")}); err != nil {
		t.Fatalf("Check: %v", err)
	}
	f.backend.FailDel = cniserver.WithReason(cniserver.ReasonDataplane, errors.New("netlink: device busy"))
	_, err = f.client.Del(ctx(t), &cniv1.DelRequest{Args: args("c1")})
	wantCode(t, err, codes.Internal, "device busy")
	f.backend.FailDel = nil
	if _, err := f.client.Del(ctx(t), &cniv1.DelRequest{Args: args("c1")}); err != nil {
		t.Fatalf("Del: %v", err)
	}
	if _, err := f.client.GC(ctx(t), &cniv1.GCRequest{}); err != nil {
		t.Fatalf("GC: %v", err)
	}

	for _, c := range []struct {
		command, result string
		want            uint64
	}{
		{"ADD", "success", 1}, {"ADD", "error", 3},
		{"CHECK", "success", 1}, {"CHECK", "error", 1},
		{"DEL", "success", 1}, {"DEL", "error", 1},
		{"GC", "success", 1}, {"GC", "error", 0},
	} {
		if got := durationCount(t, m, c.command, c.result); got != c.want {
			t.Errorf("estuary_cni_request_duration_seconds_count{command=%q,result=%q} = %d, want %d",
				c.command, c.result, got, c.want)
		}
	}
	for _, c := range []struct {
		command string
		reason  cniserver.Reason
		want    float64
	}{
		{"ADD", cniserver.ReasonInvalidArgs, 1},
		{"ADD", cniserver.ReasonIPAMTimeout, 1},
		{"ADD", cniserver.ReasonInternal, 1},
		{"ADD", cniserver.ReasonDataplane, 0},
		{"CHECK", cniserver.ReasonMismatch, 1},
		{"DEL", cniserver.ReasonDataplane, 1},
		{"DEL", cniserver.ReasonInternal, 0},
	} {
		if got := errorsOf(t, m, c.command, c.reason); got != c.want {
			t.Errorf("estuary_cni_request_errors_total{command=%q,reason=%q} = %v, want %v", c.command, c.reason, got, c.want)
		}
	}
}

// TestMetricsStartAtZeroForEveryLabel: before any request, every command
// has its duration series and every command and reason its error counter,
// so rates over them exist from the daemon's start; no label carries
// anything but a command, a result or a reason.
func TestMetricsStartAtZeroForEveryLabel(t *testing.T) {
	m := cniserver.NewMetrics()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(m)
	if n := testutil.CollectAndCount(m, "estuary_cni_request_errors_total"); n != 4*len(cniserver.Reasons) {
		t.Fatalf("%d error series, want %d (4 commands x %d reasons)", n, 4*len(cniserver.Reasons), len(cniserver.Reasons))
	}
	if n := testutil.CollectAndCount(m, "estuary_cni_request_duration_seconds"); n != 8 {
		t.Fatalf("%d duration series, want 8 (4 commands x 2 results)", n)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP estuary_cni_request_errors_total CNI requests the daemon failed, by command and reason (invalid_args, ipam_timeout, ipam_refused, bgp_session, netns, dataplane, segment_check, store, mismatch, canceled, internal).
# TYPE estuary_cni_request_errors_total counter
`+zeroCounters()), "estuary_cni_request_errors_total"); err != nil {
		t.Fatal(err)
	}
}

func zeroCounters() string {
	var b strings.Builder
	for _, c := range []string{"ADD", "CHECK", "DEL", "GC"} {
		reasons := make([]string, 0, len(cniserver.Reasons))
		for _, r := range cniserver.Reasons {
			reasons = append(reasons, string(r))
		}
		slices.Sort(reasons)
		for _, r := range reasons {
			fmt.Fprintf(&b, "estuary_cni_request_errors_total{command=%q,reason=%q} 0\n", c, r)
		}
	}
	return b.String()
}

// TestReasonOf: the innermost mark wins, context errors are canceled, gRPC
// codes map to their reasons and anything else is internal.
func TestReasonOf(t *testing.T) {
	inner := cniserver.WithReason(cniserver.ReasonBGPSession, context.DeadlineExceeded)
	for _, c := range []struct {
		name string
		err  error
		want cniserver.Reason
	}{
		{"marked", cniserver.WithReason(cniserver.ReasonNetns, errors.New("x")), cniserver.ReasonNetns},
		{"innermost", cniserver.WithReason(cniserver.ReasonIPAMTimeout, fmt.Errorf("wait: %w", inner)), cniserver.ReasonBGPSession},
		{"context", fmt.Errorf("wait: %w", context.Canceled), cniserver.ReasonCanceled},
		{"joined", errors.Join(errors.New("a"), cniserver.WithReason(cniserver.ReasonStore, errors.New("b"))), cniserver.ReasonStore},
		{"plain", errors.New("x"), cniserver.ReasonInternal},
	} {
		if got := cniserver.ReasonOf(c.err); got != c.want {
			t.Errorf("%s: ReasonOf(%v) = %s, want %s", c.name, c.err, got, c.want)
		}
	}
	if cniserver.WithReason(cniserver.ReasonNetns, nil) != nil {
		t.Error("WithReason(nil) is not nil")
	}
}
