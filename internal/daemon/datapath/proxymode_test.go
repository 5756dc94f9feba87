package datapath

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// kubeProxy serves /proxyMode as kube-proxy's metrics server does (plain
// text, the mode's name), answering mode.
func kubeProxy(t *testing.T, status int, mode string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/proxyMode", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = fmt.Fprint(w, mode)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

// TestProxyModeDetectAsksKubeProxy: each mode kube-proxy answers over real
// HTTP is the mode detected (surrounding space ignored); an error status
// or an answer that is no mode name is an error naming the URL.
func TestProxyModeDetectAsksKubeProxy(t *testing.T) {
	for _, mode := range []string{"ipvs", "iptables", "nftables", "iptables\n"} {
		s := kubeProxy(t, http.StatusOK, mode)
		got, err := ProxyModeDetector{URL: s.URL + "/proxyMode"}.Detect(context.Background())
		if want := strings.TrimSpace(mode); err != nil || got != want {
			t.Errorf("kube-proxy answering %q: detected %q, %v; want %q", mode, got, err, want)
		}
	}
	for _, tc := range []struct {
		status int
		body   string
	}{{http.StatusNotFound, "404 page not found"}, {http.StatusOK, "<html>ipvs</html>"}, {http.StatusOK, ""}} {
		s := kubeProxy(t, tc.status, tc.body)
		url := s.URL + "/proxyMode"
		if got, err := (ProxyModeDetector{URL: url}).ask(context.Background()); err == nil {
			t.Errorf("status %d body %q: detected %q, want an error", tc.status, tc.body, got)
		} else if !strings.Contains(err.Error(), url) {
			t.Errorf("status %d body %q: error %q does not name %s", tc.status, tc.body, err, url)
		}
	}
}

// TestProxyModeDetectUnreachable: with kube-proxy unreachable (its port
// closed), a node without kube-ipvs0 gives an error and no mode; a node
// with a link of that name is taken for IPVS. Run in network namespaces of
// the test's own, which hold (or not) the link.
func TestProxyModeDetectUnreachable(t *testing.T) {
	s := kubeProxy(t, http.StatusOK, "iptables")
	url := s.URL + "/proxyMode"
	s.Close()
	d := ProxyModeDetector{URL: url}
	detect := func(ns string) (mode string, err error) {
		if derr := nsrun.Do(ns, func() error {
			mode, err = d.Detect(context.Background())
			return nil
		}); derr != nil {
			t.Fatal(derr)
		}
		return mode, err
	}
	plain := nstest.New(t)
	if mode, err := detect(plain); err == nil || mode != "" {
		t.Errorf("unreachable kube-proxy, no %s: detected %q, %v; want an error", IPVSLink, mode, err)
	}
	ipvs := nstest.New(t)
	// A veth stands in for kube-proxy's dummy link (the name is the sign).
	nstest.IP(t, ipvs, "link", "add", IPVSLink, "type", "veth", "peer", "name", "kube-ipvs0p")
	if mode, err := detect(ipvs); err != nil || mode != ProxyModeIPVS {
		t.Errorf("unreachable kube-proxy, %s present: detected %q, %v; want %q", IPVSLink, mode, err, ProxyModeIPVS)
	}
}
