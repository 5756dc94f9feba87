package daemon

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/bgpstatus"
	"github.com/estuary-cni/estuary/test/infra/cniservertest"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// TestAuthenticatedMetricsServeEveryDaemonSeries starts the daemon's
// endpoints as Run does (startServing) with --metrics-bind-address, against
// a real API server: the HTTPS /metrics refuses a request without a token
// (401) and a ServiceAccount no role allows (403), and serves a token
// allowed get on /metrics every series the daemon defines, the BGP
// sessions' and the node GC's included; the health server's /metrics
// answers the node's loopback only.
func TestAuthenticatedMetricsServeEveryDaemonSeries(t *testing.T) {
	kube, k8s, stop, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	reader, err := testenv.MetricsReaderToken(ctx, k8s, "test-metrics-reader", "default", "scraper")
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := testenv.ServiceAccountToken(ctx, k8s, "default", "stranger")
	if err != nil {
		t.Fatal(err)
	}

	socket, _ := cniservertest.Paths(t)
	peers := func(context.Context) (map[string][]bgpstatus.PeerStatus, error) {
		return map[string][]bgpstatus.PeerStatus{"fabric": {{Address: netip.MustParseAddr("10.77.0.1"), ASN: 65000,
			State: bgpstatus.StateEstablished, Advertised: 2}}}, nil
	}
	parts := newRunning()
	t.Cleanup(func() { cancel(); parts.wait() })
	healthAddr := freeAddr(t)
	cfg := Config{Kube: kube, NodeName: "node-a", SocketPath: socket, HealthAddr: healthAddr, MetricsAddr: "127.0.0.1:0"}
	addr, err := startServing(ctx, cfg, parts, healthSources{peers: peers, metrics: newDaemonMetrics().collectors()})
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + addr + "/metrics"
	for token, want := range map[string]int{"": http.StatusUnauthorized, stranger: http.StatusForbidden} {
		if status, body, err := testenv.Scrape(ctx, url, token); err != nil || status != want {
			t.Errorf("GET %s with token %t: %d, %v, want %d: %.200s", url, token != "", status, err, want, body)
		}
	}
	status, body, err := testenv.Scrape(ctx, url, reader)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET %s as a metrics reader: %d, %v: %.300s", url, status, err, body)
	}
	for _, want := range []string{
		`estuary_bgp_peer_up{network="fabric",peer="10.77.0.1"} 1`,
		`estuary_bgp_advertised_prefixes{network="fabric",peer="10.77.0.1"} 2`,
		`estuary_bgp_peer_state{network="fabric",peer="10.77.0.1",state="Established"} 1`,
		"estuary_daemon_gc_collected_total ",
		`estuary_cni_request_errors_total{command="ADD",reason="ipam_timeout"} 0`,
		`estuary_cni_request_duration_seconds_count{command="DEL",result="success"} 0`,
		`estuary_datapath_reconcile_duration_seconds_count{result="success"} 0`,
		`estuary_datapath_reconcile_failures_total{part="bgp"} 0`,
		"process_start_time_seconds ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("authenticated /metrics lacks %q", want)
		}
	}

	// The health server keeps /metrics for the node itself.
	if status, err := scrapePlain(ctx, "http://"+healthAddr+"/metrics"); err != nil || status != http.StatusOK {
		t.Errorf("health /metrics on loopback: %d, %v", status, err)
	}
	h := &health{reg: newRegistry(nil, nil, nil), metricsLoopbackOnly: true}
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.RemoteAddr = "192.0.2.7:40000"
	rec := httptest.NewRecorder()
	h.mux().ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden {
		t.Errorf("health /metrics from %s: %d, want 403", req.RemoteAddr, rec.Code)
	}
}

// scrapePlain GETs url over plain HTTP and returns the status.
func scrapePlain(ctx context.Context, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}
