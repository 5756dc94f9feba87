package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/test/infra/cniservertest"
)

// TestMetricsEndpointServesTheDaemonsSeries starts the health server as Run
// does (startHealth with the daemon's metrics in its sources), fails one
// ADD on a CNI server recording into the same metrics, and scrapes
// /metrics: every series the daemon records is there, and the failure
// shows on the very endpoint Prometheus reads.
func TestMetricsEndpointServesTheDaemonsSeries(t *testing.T) {
	socket, state := cniservertest.Paths(t)
	m := newDaemonMetrics()
	cniservertest.StartConfig(t, cniserver.Config{SocketPath: socket, StatePath: state,
		Backend: cniservertest.NewBackend(), Metrics: m.cni})
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	if _, err := cniv1.NewCNIClient(conn).Add(ctx, &cniv1.AddRequest{Args: &cniv1.CmdArgs{}}); err == nil {
		t.Fatal("Add without a container ID succeeded")
	}

	addr := freeAddr(t)
	parts := newRunning()
	if _, err := startServing(ctx, Config{HealthAddr: addr, SocketPath: socket, NodeName: "node-a"}, parts,
		healthSources{metrics: m.collectors()}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); parts.wait() })
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: status %d, %v", resp.StatusCode, err)
	}
	body := string(b)
	for _, want := range []string{
		`estuary_cni_request_errors_total{command="ADD",reason="invalid_args"} 1`,
		`estuary_cni_request_errors_total{command="DEL",reason="ipam_timeout"} 0`,
		`estuary_cni_request_duration_seconds_count{command="ADD",result="error"} 1`,
		`estuary_cni_request_duration_seconds_bucket{command="DEL",result="success",le="0.001"} 0`,
		`estuary_datapath_reconcile_duration_seconds_count{result="success"} 0`,
		`estuary_datapath_reconcile_failures_total{part="overlay"} 0`,
		"estuary_daemon_gc_collected_total ", // a global: other tests of the package count into it
		"go_goroutines ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", body)
	}
}

// freeAddr is a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}
