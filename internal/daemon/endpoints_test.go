package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	endpointsv1 "github.com/estuary-cni/estuary/api/endpoints/v1"
	"github.com/estuary-cni/estuary/internal/bgpstatus"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// endpointsServer serves the health paths of a daemon on node-a whose
// store holds two endpoints.
func endpointsServer(t *testing.T) *httptest.Server {
	t.Helper()
	st, err := endpointstore.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	created := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, ep := range []endpointstore.Endpoint{
		{Key: endpointstore.Key{ContainerID: "c1", IfName: "eth0"}, Netns: "/var/run/netns/c1", PodNamespace: "a", PodName: "web",
			PodUID: "u1", Network: "overlay", IPs: []string{"10.0.0.2/32", "fd00::2/128"}, Result: []byte(`{"secret":1}`), Created: created},
		{Key: endpointstore.Key{ContainerID: "c2", IfName: "net1"}, Netns: "/var/run/netns/c2", PodNamespace: "b", PodName: "db",
			PodUID: "u2", IPs: []string{"10.1.0.3/32"}, Created: created, Recovered: true},
	} {
		if err := st.Put(ep); err != nil {
			t.Fatal(err)
		}
	}
	h := &health{endpoints: st, node: "node-a"}
	srv := httptest.NewServer(h.mux())
	t.Cleanup(srv.Close)
	return srv
}

// /endpoints serves the node and every endpoint's pod, container,
// interface and addresses, without the stored CNI result, and only to GET.
func TestEndpointsHandler(t *testing.T) {
	srv := endpointsServer(t)
	resp, err := http.Get(srv.URL + "/endpoints")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var raw bytes.Buffer
	if _, err := raw.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /endpoints: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
	var got endpointsv1.NodeEndpointList
	if err := json.Unmarshal(raw.Bytes(), &got); err != nil {
		t.Fatalf("decode %s: %v", raw.String(), err)
	}
	if got.Node != "node-a" || len(got.Endpoints) != 2 {
		t.Fatalf("/endpoints = %+v", got)
	}
	web, db := got.Endpoints[0], got.Endpoints[1]
	if web.Pod() != "a/web" || web.PodUID != "u1" || web.Key() != "c1/eth0" || web.Network != "overlay" ||
		strings.Join(web.IPs, ",") != "10.0.0.2/32,fd00::2/128" || web.Created.IsZero() {
		t.Errorf("first endpoint = %+v", web)
	}
	if db.Pod() != "b/db" || db.Key() != "c2/net1" || !db.Recovered {
		t.Errorf("second endpoint = %+v", db)
	}
	if strings.Contains(raw.String(), "secret") || strings.Contains(raw.String(), "netns") {
		t.Errorf("/endpoints exposes the stored result or netns: %s", raw.String())
	}
	post, err := http.Post(srv.URL+"/endpoints", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_ = post.Body.Close()
	if post.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /endpoints: %s, want 405", post.Status)
	}
}

// `estuary-daemon endpoints` prints what /endpoints serves, and fails
// with the reason when the daemon does not answer.
func TestEndpointsCommand(t *testing.T) {
	srv := endpointsServer(t)
	var out, errOut bytes.Buffer
	addr := strings.TrimPrefix(srv.URL, "http://")
	if code := EndpointsMain([]string{"--health-address", addr}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got endpointsv1.NodeEndpointList
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not the endpoint list: %v\n%s", err, out.String())
	}
	if got.Node != "node-a" || len(got.Endpoints) != 2 || got.Endpoints[1].Key() != "c2/net1" {
		t.Errorf("printed %+v", got)
	}

	srv.Close()
	out.Reset()
	if code := EndpointsMain([]string{"--health-address", addr, "--timeout", "2s"}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "read the daemon's endpoints") || out.Len() != 0 {
		t.Errorf("daemon gone: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}

// An unspecified host is read on loopback; "0" (disabled) is an error.
func TestEndpointsAddress(t *testing.T) {
	for in, want := range map[string]string{
		":9782": "127.0.0.1:9782", "0.0.0.0:9782": "127.0.0.1:9782", "[::]:9782": "[::1]:9782", "127.0.0.1:9": "127.0.0.1:9",
	} {
		if got, err := loopbackFor(in); err != nil || got != want {
			t.Errorf("loopbackFor(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := FetchEndpoints(context.Background(), "0"); err == nil || !strings.Contains(err.Error(), "serves no health endpoint") {
		t.Errorf("FetchEndpoints on a disabled health server: %v", err)
	}
}

// /endpoints and /bgp answer only peers on the node's loopback; /metrics
// answers whoever the health address lets in.
func TestLocalPathsAnswerOnlyLoopback(t *testing.T) {
	st, err := endpointstore.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	h := &health{endpoints: st, node: "node-a", bgp: func(context.Context) (map[string][]bgpstatus.PeerStatus, error) { return nil, nil }}
	mux := h.mux()
	for remote, want := range map[string]int{
		"127.0.0.1:40000": http.StatusOK, "127.0.0.53:40000": http.StatusOK, "[::1]:40000": http.StatusOK,
		"[::ffff:127.0.0.1]:40000": http.StatusOK,
		"10.244.0.7:40000":         http.StatusForbidden, "192.0.2.2:40000": http.StatusForbidden, "[fd00::2]:40000": http.StatusForbidden,
		"[fe80::1%eth0]:40000": http.StatusForbidden, "[::ffff:10.0.0.1]:40000": http.StatusForbidden, "garbage": http.StatusForbidden, "": http.StatusForbidden,
	} {
		for _, path := range []string{"/endpoints", "/bgp"} {
			req := httptest.NewRequest(http.MethodGet, path, nil)
			req.RemoteAddr = remote
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, req)
			if rec.Code != want {
				t.Errorf("GET %s from %q: %d, want %d", path, remote, rec.Code, want)
			}
		}
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("GET /metrics from %q: %d, want 200", remote, rec.Code)
		}
	}

	// Bound to every address, a peer reaching a non-loopback address of
	// this host is refused, and `estuary-daemon endpoints` reads on
	// loopback.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, _, err := serveHealth(ctx, "0.0.0.0:0", h)
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	if _, err := FetchEndpoints(ctx, ":"+port); err != nil {
		t.Errorf("endpoints read on loopback from a server bound to 0.0.0.0: %v", err)
	}
	other := nonLoopbackIPv4(t)
	if !other.IsValid() {
		t.Log("no non-loopback IPv4 address on this host: the socket-level half is skipped")
		return
	}
	for _, path := range []string{"/endpoints", "/bgp", "/metrics"} {
		resp, err := http.Get("http://" + net.JoinHostPort(other.String(), port) + path)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		want := http.StatusForbidden
		if path == "/metrics" {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			t.Errorf("GET %s via %s: %s, want %d", path, other, resp.Status, want)
		}
	}
	if _, err := FetchEndpoints(ctx, net.JoinHostPort(other.String(), port)); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("endpoints read via %s: %v, want 403", other, err)
	}
}

// nonLoopbackIPv4 is an IPv4 address of this host that is not loopback, or
// the zero Addr.
func nonLoopbackIPv4(t *testing.T) netip.Addr {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Is4() && !p.Addr().IsLoopback() {
			return p.Addr()
		}
	}
	return netip.Addr{}
}
