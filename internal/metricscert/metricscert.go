// Package metricscert keeps the certificate the manager and the daemons
// serve /metrics with, so that a scraper verifies whom it talks to.
//
// The manager runs a certificate rotator (cert-controller, as for the
// admission webhook) on a Secret of the release namespace: a CA and a
// serving certificate for fixed DNS names, the metrics Services'
// (estuary-manager-metrics.<ns>.svc, estuary-daemon-metrics.<ns>.svc), renewed
// before they expire. The manager and every daemon mount the Secret (the
// daemons its certificate and key only) and serve what the files hold at each
// handshake (internal/servingcert). The CA is published in a ConfigMap of
// the same namespace (key ca.crt), readable without access to any Secret:
// a Prometheus verifies the components with it and the Service's name as
// server name. When the CA is renewed the ConfigMap keeps the previous one
// after the new one until it expires, so a scraper trusts both while the
// nodes' mounted files catch up.
//
// Every manager replica runs the rotator and the publisher (they write
// the same Secret and ConfigMap, idempotently): each replica serves
// /metrics, and so needs the certificate, whether it leads or not.
package metricscert

import (
	"fmt"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/estuary-cni/estuary/internal/webhook"
)

// CAKey is the key of the CA bundle in the ConfigMap (and of the CA in the
// Secret).
const CAKey = "ca.crt"

// Config configures Add.
type Config struct {
	// Secret holds the CA and the serving certificate. It must exist (it
	// may be empty); the rotator fills it.
	Secret types.NamespacedName
	// DNSNames are the names the certificate is valid for; the first is its
	// common name.
	DNSNames []string
	// CertDir is where Secret is mounted in the manager's pod.
	CertDir string
	// ConfigMap, in Secret's namespace, receives the CA bundle under CAKey.
	// It must exist: the manager may update it, not create it.
	ConfigMap string
}

// Validate names what is missing.
func (c Config) Validate() error {
	switch {
	case c.Secret.Namespace == "" || c.Secret.Name == "":
		return fmt.Errorf("metrics certificate: the Secret needs a namespace and a name, got %q", c.Secret)
	case len(c.DNSNames) == 0:
		return fmt.Errorf("metrics certificate %s: no DNS name", c.Secret)
	case c.CertDir == "":
		return fmt.Errorf("metrics certificate %s: no directory it is mounted at", c.Secret)
	case c.ConfigMap == "":
		return fmt.Errorf("metrics certificate %s: no ConfigMap for its CA", c.Secret)
	}
	return nil
}

// Add adds the rotator and the CA publisher to mgr.
func Add(mgr manager.Manager, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	scoped := webhook.NameScopedManager(mgr, map[string]string{
		"/api/v1/namespaces/" + c.Secret.Namespace + "/secrets": c.Secret.Name,
	})
	err := rotator.AddRotator(scoped, &rotator.CertRotator{
		SecretKey:      c.Secret,
		CertDir:        c.CertDir,
		CAName:         "estuary-metrics-ca",
		CAOrganization: "estuary",
		DNSName:        c.DNSNames[0],
		ExtraDNSNames:  c.DNSNames[1:],
		// Closed once the files are mounted; nothing waits for it: the
		// metrics server serves the files whenever they are there.
		IsReady:               make(chan struct{}),
		ControllerName:        "metrics-cert-rotator",
		RequireLeaderElection: false,
	})
	if err != nil {
		return fmt.Errorf("add metrics certificate rotator: %w", err)
	}
	p := &publisher{
		reader: mgr.GetAPIReader(), writer: mgr.GetClient(),
		secret: c.Secret, configMap: types.NamespacedName{Namespace: c.Secret.Namespace, Name: c.ConfigMap},
		fast: 5 * time.Second, slow: time.Minute, log: ctrl.Log.WithName("metrics-ca"),
	}
	if err := mgr.Add(p); err != nil {
		return fmt.Errorf("add metrics CA publisher: %w", err)
	}
	return nil
}
