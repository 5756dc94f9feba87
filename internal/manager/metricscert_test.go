package manager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// TestMetricsSettingsNameTheFlag: bad metrics certificate and DaemonSet
// settings are refused, each naming its flag, before anything starts.
func TestMetricsSettingsNameTheFlag(t *testing.T) {
	valid := Config{Kube: &rest.Config{}, Workers: 1, MetricsSecure: true, DaemonSet: "kube-system/estuary-daemon",
		MetricsCert: MetricsCertConfig{Secret: "kube-system/estuary-metrics-cert", DNSNames: []string{"a.kube-system.svc"}, CertDir: "/c", CAConfigMap: "estuary-metrics-ca"}}
	if err := valid.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"secret without namespace", func(c *Config) { c.MetricsCert.Secret = "estuary-metrics-cert" }, `--metrics-cert-secret="estuary-metrics-cert": want namespace/name`},
		{"not secure", func(c *Config) { c.MetricsSecure = false }, "needs --metrics-secure"},
		{"no names", func(c *Config) { c.MetricsCert.DNSNames = nil }, "needs --metrics-cert-dns-names"},
		{"no dir", func(c *Config) { c.MetricsCert.CertDir = "" }, "needs --metrics-cert-dir"},
		{"no configmap", func(c *Config) { c.MetricsCert.CAConfigMap = "" }, "needs --metrics-ca-configmap"},
		{"daemonset", func(c *Config) { c.DaemonSet = "a/b/c" }, `--daemonset="a/b/c": want namespace/name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid
			tc.edit(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

// TestMetricsServeTheRotatedCertificate: with a metrics certificate the
// manager's secure /metrics serves the files of its directory, verified by
// their CA as the metrics Service's name, and serves a renewed pair from
// the next connection on, without a restart.
func TestMetricsServeTheRotatedCertificate(t *testing.T) {
	ctx, cancel := context.WithCancel(bg())
	defer cancel()
	reader, err := testenv.MetricsReaderToken(ctx, k8s, "test-metrics-reader", "default", "scraper")
	if err != nil {
		t.Fatal(err)
	}
	const name = "estuary-manager-metrics.kube-system.svc"
	dir := t.TempDir()
	first := writePair(t, dir, name)
	metrics := freeAddr(t)
	cfg := Config{Kube: kube, MetricsAddr: metrics, MetricsSecure: true, ProbeAddr: "0", Workers: 1,
		MetricsCert: MetricsCertConfig{Secret: "kube-system/estuary-metrics-cert", DNSNames: []string{name}, CertDir: dir, CAConfigMap: "estuary-metrics-ca"}}
	mgr, err := newManager(cfg.withDefaults())
	if err != nil {
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
	testenv.Eventually(t, "/metrics verified with the first CA", time.Minute, func() error {
		return scrapeVerified(ctx, url, reader, first, name)
	})
	second := writePair(t, dir, name)
	if err := scrapeVerified(ctx, url, reader, second, name); err != nil {
		t.Errorf("after renewal: %v", err)
	}
	if err := scrapeVerified(ctx, url, reader, first, name); err == nil {
		t.Error("after renewal the first CA still verifies the served certificate")
	}
}

// writePair writes a certificate for name, signed by a CA of its own, into
// dir and returns that CA.
func writePair(t *testing.T, dir, name string) *x509.CertPool {
	t.Helper()
	cert, key, err := certutil.GenerateSelfSignedCertKey(name, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for file, b := range map[string][]byte{"tls.key": key, "tls.crt": cert} {
		tmp := filepath.Join(dir, "."+file)
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, file)); err != nil {
			t.Fatal(err)
		}
	}
	_, rest := pem.Decode(cert)
	block, _ := pem.Decode(rest)
	if block == nil {
		t.Fatal("no CA after the leaf")
	}
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return pool
}

func scrapeVerified(ctx context.Context, url, token string, roots *x509.CertPool, name string) error {
	status, body, err := testenv.ScrapeTLS(ctx, url, token, &tls.Config{RootCAs: roots, ServerName: name, MinVersion: tls.VersionTLS12})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return &statusError{status, body}
	}
	return nil
}

type statusError struct {
	status int
	body   string
}

func (e *statusError) Error() string { return http.StatusText(e.status) + ": " + e.body }
