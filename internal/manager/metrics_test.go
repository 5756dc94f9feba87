package manager

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/estuary-cni/estuary/internal/webhook"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// TestSecureMetricsAnswerOnlyAuthorizedScrapers: with --metrics-secure the
// manager serves /metrics over HTTPS; a request without a token is refused
// with 401, the token of a ServiceAccount no role allows /metrics with 403,
// and a token allowed get on /metrics (as estuary-metrics-reader grants)
// reads controller-runtime's webhook latency histogram once the admission
// webhook answered a review.
func TestSecureMetricsAnswerOnlyAuthorizedScrapers(t *testing.T) {
	ctx, cancel := context.WithCancel(bg())
	defer cancel()
	reader, err := testenv.MetricsReaderToken(ctx, k8s, "test-metrics-reader", "default", "scraper")
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := testenv.ServiceAccountToken(ctx, k8s, "default", "stranger")
	if err != nil {
		t.Fatal(err)
	}
	// The manager Run builds, with its metrics server and webhook, without
	// the controllers: Run registers their metrics once per process, and
	// TestRunLeadsAllocatesAndStops runs it.
	metrics, port := freeAddr(t), freePort(t)
	cfg := Config{Kube: kube, MetricsAddr: metrics, MetricsSecure: true, ProbeAddr: "0", Workers: 1,
		Webhook: WebhookConfig{Port: port, CertDir: servingCert(t)}}
	mgr, err := newManager(cfg.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := setupWebhook(ctx, mgr, cfg.Webhook, webhook.Options{}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	url := "https://" + metrics + "/metrics"
	testenv.Eventually(t, "/metrics refuses a request without a token", time.Minute, func() error {
		return wantStatus(ctx, url, "", http.StatusUnauthorized)
	})
	if err := wantStatus(ctx, url, stranger, http.StatusForbidden); err != nil {
		t.Error(err)
	}
	if err := admissionReview(ctx, port); err != nil {
		t.Fatal(err)
	}
	series := `controller_runtime_webhook_latency_seconds_count{webhook="` + webhook.PathValidatePod + `"}`
	testenv.Eventually(t, "an allowed scraper reads the webhook's latency", 30*time.Second, func() error {
		status, body, err := testenv.Scrape(ctx, url, reader)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			return fmt.Errorf("status %d: %.200s", status, body)
		}
		if n := seriesValue(body, series); n < 1 {
			return fmt.Errorf("%s = %v, want at least 1", series, n)
		}
		return nil
	})
}

func wantStatus(ctx context.Context, url, token string, want int) error {
	status, body, err := testenv.Scrape(ctx, url, token)
	if err != nil {
		return err
	}
	if status != want {
		return fmt.Errorf("GET %s with token %t: status %d, want %d: %.200s", url, token != "", status, want, body)
	}
	return nil
}

// admissionReview sends the pod webhook one review, as the API server would.
func admissionReview(ctx context.Context, port int) error {
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"0001",
"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},
"operation":"CREATE","namespace":"default","name":"p","userInfo":{"username":"test"},
"object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default"},
"spec":{"containers":[{"name":"c","image":"pause"}]}}}}`
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // G402: the test's own certificate
	}}
	u := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + webhook.PathValidatePod
	var lastErr error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewBufferString(review))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			lastErr = err
			continue
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("POST %s: %s", u, resp.Status)
		}
		return nil
	}
	return fmt.Errorf("POST %s: %w", u, lastErr)
}

// seriesValue is the value of series in a scrape, or -1 when absent.
func seriesValue(body, series string) float64 {
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}

// servingCert writes a self-signed tls.crt and tls.key for 127.0.0.1 into a
// directory and returns it.
func servingCert(t *testing.T) string {
	t.Helper()
	cert, key, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, b := range map[string][]byte{"tls.crt": cert, "tls.key": key} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// freePort is a port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	_, p, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
