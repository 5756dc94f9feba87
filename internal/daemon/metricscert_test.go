package daemon

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	certutil "k8s.io/client-go/util/cert"

	"github.com/estuary-cni/estuary/internal/servingcert"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// TestMetricsServeTheMountedCertificateWhenItAppears starts the daemon's
// endpoints with --metrics-cert-dir naming an empty directory, as when the
// daemon starts before the manager filled the metrics Secret: the daemon
// starts, its health server answers, and /metrics refuses handshakes
// (the listener stays up). Once
// a certificate for the metrics Service's name appears in the directory, a
// scraper that verifies it with its CA and that server name gets the
// metrics, without a restart.
func TestMetricsServeTheMountedCertificateWhenItAppears(t *testing.T) {
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
	const serverName = "estuary-daemon-metrics.estuary-system.svc"
	certDir := t.TempDir()
	parts := newRunning()
	t.Cleanup(func() { cancel(); parts.wait() })
	healthAddr := freeAddr(t)
	socket := filepath.Join(t.TempDir(), "cni.sock")
	cfg := Config{Kube: kube, NodeName: "node-a", SocketPath: socket, HealthAddr: healthAddr, MetricsAddr: "127.0.0.1:0", MetricsCertDir: certDir}
	addr, err := startServing(ctx, cfg, parts, healthSources{metrics: newDaemonMetrics().collectors()})
	if err != nil {
		t.Fatalf("start without a certificate: %v", err)
	}
	if _, err := scrapePlain(ctx, "http://"+healthAddr+"/healthz"); err != nil {
		t.Errorf("health server without a metrics certificate: %v", err)
	}
	url := "https://" + addr + "/metrics"
	if status, _, err := testenv.Scrape(ctx, url, reader); err == nil {
		t.Errorf("GET %s before the certificate exists: %d; want a failed handshake", url, status)
	}

	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(serverName, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{servingcert.KeyFileName: keyPEM, servingcert.CertFileName: certPEM} {
		if err := os.WriteFile(filepath.Join(certDir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	verify := &tls.Config{RootCAs: caOf(t, certPEM), ServerName: serverName, MinVersion: tls.VersionTLS12}
	status, _, err := testenv.ScrapeTLS(ctx, url, reader, verify)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET %s verifying %s with its CA: %d, %v", url, serverName, status, err)
	}
	wrongName := verify.Clone()
	wrongName.ServerName = "estuary-elsewhere.estuary-system.svc"
	if _, _, err := testenv.ScrapeTLS(ctx, url, reader, wrongName); err == nil {
		t.Errorf("GET %s verifying another name succeeded", url)
	}
}

// caOf is a pool of the CA certificutil appends after the leaf.
func caOf(t *testing.T, chain []byte) *x509.CertPool {
	t.Helper()
	pool := x509.NewCertPool()
	_, rest := pem.Decode(chain)
	ca, _ := pem.Decode(rest)
	if ca == nil {
		t.Fatal("no CA after the leaf")
	}
	c, err := x509.ParseCertificate(ca.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool.AddCert(c)
	return pool
}
