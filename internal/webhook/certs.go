package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// CertRotation configures the webhook's certificates in the cluster. A
// rotator (cert-controller) keeps a CA and a serving certificate for the
// Service in Secret, renews them before they expire, and injects the CA
// into the webhook configurations; the Secret is mounted at CertDir, where
// the webhook server reads it. No key or certificate exists outside the
// cluster.
type CertRotation struct {
	// Secret holds the CA and the serving certificate. It must exist (it
	// may be empty); the rotator fills it.
	Secret types.NamespacedName
	// Service is the name of the Service, in Secret's namespace, through
	// which the API server calls the webhook.
	Service string
	// Configuration names the ValidatingWebhookConfiguration and the
	// MutatingWebhookConfiguration to inject the CA into.
	Configuration string
	// CertDir is where Secret is mounted.
	CertDir string
}

// AddCertRotator adds the rotator to mgr. The returned channel is closed
// once the serving certificate is mounted and the CA injected: the webhook
// server must not start before (see Register).
func AddCertRotator(mgr manager.Manager, c CertRotation) (<-chan struct{}, error) {
	if c.Secret.Namespace == "" || c.Secret.Name == "" || c.Service == "" || c.Configuration == "" || c.CertDir == "" {
		return nil, fmt.Errorf("certificate rotation needs a Secret (namespace and name), a Service, a configuration name and the directory the Secret is mounted at")
	}
	ready := make(chan struct{})
	err := rotator.AddRotator(scopedManager{Manager: mgr, config: scopedConfig(mgr.GetConfig(), c)}, &rotator.CertRotator{
		SecretKey:      c.Secret,
		CertDir:        c.CertDir,
		CAName:         "estuary-webhook-ca",
		CAOrganization: "estuary",
		DNSName:        fmt.Sprintf("%s.%s.svc", c.Service, c.Secret.Namespace),
		ExtraDNSNames:  []string{fmt.Sprintf("%s.%s.svc.cluster.local", c.Service, c.Secret.Namespace)},
		IsReady:        ready,
		Webhooks: []rotator.WebhookInfo{
			{Name: c.Configuration, Type: rotator.Validating},
			{Name: c.Configuration, Type: rotator.Mutating},
		},
		// Every replica serves the webhook, so every replica needs the
		// certificate: the rotator does not wait to lead.
		RequireLeaderElection: false,
	})
	if err != nil {
		return nil, fmt.Errorf("add certificate rotator: %w", err)
	}
	return ready, nil
}

// SetupWithRotation is Setup for a webhook whose certificate the rotator
// makes: it registers what the cache needs (Prepare) and the rotator now,
// and the handlers (and with them the webhook server, which needs the
// certificate to start) once the certificate is in place. The returned
// channel is closed then.
func SetupWithRotation(ctx context.Context, mgr manager.Manager, c CertRotation, opts Options) (<-chan struct{}, error) {
	if err := Prepare(ctx, mgr); err != nil {
		return nil, err
	}
	certs, err := AddCertRotator(mgr, c)
	if err != nil {
		return nil, err
	}
	registered := make(chan struct{})
	go func() {
		select {
		case <-certs:
			Register(mgr, opts)
			close(registered)
		case <-ctx.Done():
		}
	}()
	return registered, nil
}

// ReadyCheck is a readiness check that passes once registered is closed and
// mgr's webhook server answers.
func ReadyCheck(mgr manager.Manager, registered <-chan struct{}) healthz.Checker {
	return func(r *http.Request) error {
		select {
		case <-registered:
			return mgr.GetWebhookServer().StartedChecker()(r)
		default:
			return errors.New("the webhook's certificate is not in place yet")
		}
	}
}
