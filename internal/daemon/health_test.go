package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/bgpstatus"
	"github.com/estuary-cni/estuary/test/infra/cniservertest"
)

func TestHealthCheck(t *testing.T) {
	socket, state := cniservertest.Paths(t)
	backend := cniservertest.NewBackend()
	cniservertest.Start(t, backend, socket, state)
	h, err := newHealth(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.conn.Close() })
	ctx := context.Background()

	if err := h.check(ctx); err == nil || !strings.Contains(err.Error(), "cache has not synced") {
		t.Fatalf("check before sync = %v", err)
	}
	h.synced.Store(true)
	if err := h.check(ctx); err != nil {
		t.Fatalf("check = %v", err)
	}
	backend.SetNotReady(errors.New("host namespace gone"))
	if err := h.check(ctx); err == nil || !strings.Contains(err.Error(), "host namespace gone") {
		t.Fatalf("check with backend not ready = %v", err)
	}
}

func TestHealthCheckServerDown(t *testing.T) {
	socket, _ := cniservertest.Paths(t)
	h, err := newHealth(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.conn.Close() })
	h.synced.Store(true)
	if err := h.check(context.Background()); err == nil || !strings.Contains(err.Error(), "cni server status") {
		t.Fatalf("check without server = %v", err)
	}
}

func TestServeHealth(t *testing.T) {
	socket, _ := cniservertest.Paths(t)
	h, err := newHealth(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	_, done, err := serveHealth(ctx, "127.0.0.1:0", h)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve after cancel: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("health server did not stop on cancel")
	}
}

func TestHealthHandler(t *testing.T) {
	socket, state := cniservertest.Paths(t)
	cniservertest.Start(t, cniservertest.NewBackend(), socket, state)
	h, err := newHealth(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	lis, _, err := serveHealth(ctx, "127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	get := func() (int, string) {
		resp, err := http.Get("http://" + lis + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(); code != http.StatusServiceUnavailable || !strings.Contains(body, "has not synced") {
		t.Fatalf("before sync: %d %q", code, body)
	}
	h.synced.Store(true)
	if code, body := get(); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("after sync: %d %q", code, body)
	}
}

func TestBGPStatusJSON(t *testing.T) {
	socket, _ := cniservertest.Paths(t)
	h, err := newHealth(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.conn.Close() })
	peer := bgpstatus.PeerStatus{Address: netip.MustParseAddr("10.77.0.1"), ASN: 65000, State: bgpstatus.StateEstablished}
	h.bgp = func(context.Context) (map[string][]bgpstatus.PeerStatus, error) {
		return map[string][]bgpstatus.PeerStatus{"fabric": {peer}}, errors.New("network other: list bgp peers: timeout")
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	lis, _, err := serveHealth(ctx, "127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + lis + "/bgp")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var got bgpStatus
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	if resp.Header.Get("Content-Type") != "application/json" || len(got.Networks["fabric"]) != 1 ||
		got.Networks["fabric"][0] != peer || !strings.Contains(got.Error, "network other") {
		t.Fatalf("/bgp = %+v (%s)", got, resp.Header.Get("Content-Type"))
	}
}

func TestMetricsExportPeerState(t *testing.T) {
	socket, _ := cniservertest.Paths(t)
	h, err := newHealth(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.conn.Close() })
	h.bgp = func(context.Context) (map[string][]bgpstatus.PeerStatus, error) {
		return map[string][]bgpstatus.PeerStatus{"fabric": {{Address: netip.MustParseAddr("10.77.0.1"), ASN: 65000, State: bgpstatus.StateEstablished}}}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	lis, _, err := serveHealth(ctx, "127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + lis + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`estuary_bgp_peer_state{network="fabric",peer="10.77.0.1",state="Established"} 1`,
		`estuary_bgp_peer_state{network="fabric",peer="10.77.0.1",state="Active"} 0`,
		"go_goroutines ",
		"estuary_daemon_gc_collected_total ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

func TestPprofOnlyWhenAskedAndOnlyToLoopback(t *testing.T) {
	serve := func(h *health, remote string) int {
		req := httptest.NewRequest(http.MethodGet, "/debug/pprof/heap", nil)
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		h.mux().ServeHTTP(rec, req)
		return rec.Code
	}
	off := &health{reg: newRegistry(nil, nil, nil)}
	if code := serve(off, "127.0.0.1:40000"); code != http.StatusNotFound {
		t.Errorf("without --pprof, /debug/pprof/heap from loopback: %d, want 404", code)
	}
	on := &health{reg: newRegistry(nil, nil, nil), pprof: true}
	if code := serve(on, "127.0.0.1:40000"); code != http.StatusOK {
		t.Errorf("with --pprof, /debug/pprof/heap from loopback: %d, want 200", code)
	}
	if code := serve(on, "192.0.2.7:40000"); code != http.StatusForbidden {
		t.Errorf("with --pprof, /debug/pprof/heap from 192.0.2.7: %d, want 403", code)
	}
}
