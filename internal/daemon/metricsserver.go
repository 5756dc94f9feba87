package daemon

// The daemon's authenticated metrics endpoint (--metrics-bind-address).
//
// Prometheus scrapes every node's daemon over the network, so there
// /metrics is served over HTTPS and answers only a caller the API server
// vouches for: its bearer token passes a TokenReview and a
// SubjectAccessReview allows it get on the non-resource URL /metrics (the
// ClusterRole estuary-metrics-reader grants that). The check is
// controller-runtime's filters.WithAuthenticationAndAuthorization, the one
// the manager's metrics server runs, with its caches (a minute for a
// token, five for an allowed and thirty seconds for a denied review), so a
// scrape every few seconds costs the API server about one review a minute.
//
// The certificate is the manager's metrics certificate (internal/metricscert)
// mounted at --metrics-cert-dir and read at each handshake
// (internal/servingcert), so a renewal needs no restart: a scraper verifies
// it with the CA the manager publishes and the metrics Service's name. Until
// the Secret is filled handshakes fail and the daemon does its work: the data
// path never waits for metrics. Without --metrics-cert-dir the certificate
// is self-signed and made in memory at each start, as controller-runtime's
// metrics server does without one: the token and the metrics stay off the
// wire in clear, but the scraper cannot verify whom it talks to.
// HTTP/2 is not offered: the endpoint needs none of it, and HTTP/1.1 keeps
// it out of HTTP/2's stream-reset floods.
//
// The health server keeps /metrics too, for the node itself: once this
// endpoint serves the network it answers only loopback peers there, like
// /bgp and /endpoints.

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"

	"github.com/estuary-cni/estuary/internal/servingcert"
)

// servesMetrics reports whether the daemon serves the authenticated
// metrics endpoint.
func (c Config) servesMetrics() bool { return c.MetricsAddr != "" && c.MetricsAddr != "0" }

// startMetrics serves reg on cfg.MetricsAddr's /metrics over HTTPS to
// authorized callers until ctx ends; parts learns when it fails. It returns
// once listening, with the bound address ("" when none is configured).
func startMetrics(ctx context.Context, cfg Config, parts *running, reg prometheus.Gatherer) (string, error) {
	if !cfg.servesMetrics() {
		return "", nil
	}
	handler, err := authorizedMetrics(cfg.Kube, reg)
	if err != nil {
		return "", err
	}
	tlsConfig, err := metricsTLS(cfg)
	if err != nil {
		return "", err
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", cfg.MetricsAddr)
	if err != nil {
		return "", fmt.Errorf("metrics listener on %s (--metrics-bind-address): %w", cfg.MetricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", handler)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, TLSConfig: tlsConfig}
	done := serve(ctx, tls.NewListener(lis, tlsConfig), srv)
	parts.goFunc("metrics server", func() error { return <-done })
	addr := lis.Addr().String()
	log.Info("serving metrics", "address", addr, "path", "/metrics", "secure", true)
	return addr, nil
}

// authorizedMetrics is reg's /metrics handler behind the TokenReview and
// SubjectAccessReview filter, reviewed by the API server kube names.
func authorizedMetrics(kube *rest.Config, reg prometheus.Gatherer) (http.Handler, error) {
	hc, err := rest.HTTPClientFor(kube)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization client: %w", err)
	}
	filter, err := filters.WithAuthenticationAndAuthorization(kube, hc)
	if err != nil {
		return nil, fmt.Errorf("metrics authorization: %w", err)
	}
	h, err := filter(log.WithName("metrics"), promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	if err != nil {
		return nil, fmt.Errorf("metrics authorization: %w", err)
	}
	return h, nil
}

// metricsTLS serves the certificate of cfg.MetricsCertDir, else a
// self-signed one.
func metricsTLS(cfg Config) (*tls.Config, error) {
	if cfg.MetricsCertDir != "" {
		return servingcert.TLSConfig(cfg.MetricsCertDir), nil
	}
	return selfSignedTLS(cfg.NodeName)
}

// selfSignedTLS is a TLS configuration with a certificate for node (and
// localhost, 127.0.0.1) signed by a CA made for it, neither written
// anywhere, offering HTTP/1.1 only.
func selfSignedTLS(node string) (*tls.Config, error) {
	cert, key, err := certutil.GenerateSelfSignedCertKey(node, []net.IP{net.IPv4(127, 0, 0, 1)}, []string{"localhost"})
	if err != nil {
		return nil, fmt.Errorf("metrics serving certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("metrics serving certificate: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}, nil
}
