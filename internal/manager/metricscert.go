package manager

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/estuary-cni/estuary/internal/daemonsetmetrics"
	"github.com/estuary-cni/estuary/internal/metricscert"
	"github.com/estuary-cni/estuary/internal/servingcert"
)

// daemonSetInterval is how often the daemons' DaemonSet status is read for
// estuary_daemonset_pods.
const daemonSetInterval = 15 * time.Second

// validateMetrics checks the metrics certificate and DaemonSet settings.
func (c Config) validateMetrics() []error {
	var errs []error
	if m := c.MetricsCert; m.Secret != "" {
		if _, err := namespacedName("--metrics-cert-secret", m.Secret); err != nil {
			errs = append(errs, err)
		}
		if !c.MetricsSecure {
			errs = append(errs, fmt.Errorf("--metrics-cert-secret=%q: needs --metrics-secure", m.Secret))
		}
		if len(m.DNSNames) == 0 {
			errs = append(errs, fmt.Errorf("--metrics-cert-secret=%q: needs --metrics-cert-dns-names", m.Secret))
		}
		if m.CertDir == "" {
			errs = append(errs, fmt.Errorf("--metrics-cert-secret=%q: needs --metrics-cert-dir", m.Secret))
		}
		if m.CAConfigMap == "" {
			errs = append(errs, fmt.Errorf("--metrics-cert-secret=%q: needs --metrics-ca-configmap", m.Secret))
		}
	}
	if c.DaemonSet != "" {
		if _, err := namespacedName("--daemonset", c.DaemonSet); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// namespacedName parses a flag's namespace/name.
func namespacedName(flag, v string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(v, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("%s=%q: want namespace/name", flag, v)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// metricsCertTLS serves the manager's /metrics with the rotated certificate
// mounted at cfg.MetricsCert.CertDir, read at each handshake; nil without
// rotation.
func metricsCertTLS(cfg Config) func(*tls.Config) {
	if cfg.MetricsCert.Secret == "" {
		return nil
	}
	files := servingcert.NewFiles(cfg.MetricsCert.CertDir)
	return func(c *tls.Config) {
		c.Certificates = nil
		c.GetCertificate = files.GetCertificate
	}
}

// setupMetrics adds the metrics certificate's rotator and CA publisher and
// the DaemonSet exporter, as configured.
func setupMetrics(mgr ctrlmanager.Manager, cfg Config) error {
	var errs []error
	if m := cfg.MetricsCert; m.Secret != "" {
		secret, err := namespacedName("--metrics-cert-secret", m.Secret)
		if err != nil {
			return err
		}
		errs = append(errs, metricscert.Add(mgr, metricscert.Config{
			Secret: secret, DNSNames: m.DNSNames, CertDir: m.CertDir, ConfigMap: m.CAConfigMap,
		}))
	}
	if cfg.DaemonSet != "" {
		ds, err := namespacedName("--daemonset", cfg.DaemonSet)
		if err != nil {
			return err
		}
		e, err := daemonsetmetrics.New(ctrlmetrics.Registry, mgr.GetAPIReader(), ds, daemonSetInterval, ctrl.Log.WithName("daemonset-metrics"))
		if err == nil {
			err = mgr.Add(e)
		}
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("set up metrics: %w", err)
	}
	return nil
}
