package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/bootstrap"
	"github.com/estuary-cni/estuary/internal/controller/bgpstatus"
	"github.com/estuary-cni/estuary/internal/controller/nodelabel"
	"github.com/estuary-cni/estuary/internal/controller/podipam"
	"github.com/estuary-cni/estuary/internal/controller/policystatus"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/webhook"
	"github.com/estuary-cni/estuary/internal/workload"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

var log = ctrl.Log.WithName("manager")

// Run runs the manager until ctx ends: it builds the controller-runtime
// manager, registers the controllers, the webhook and the bootstrap, adds
// the health and readiness checks, and starts them. It returns the first
// error that stops it, or nil once ctx is done.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	cfg = cfg.withDefaults()
	cfg.Kube = cfg.restConfig()
	selector, err := cfg.podSelector()
	if err != nil {
		return err
	}
	if cfg.UpgradeCRDs {
		if err := upgradeCRDs(ctx, cfg.Kube); err != nil {
			return err
		}
	}
	mgr, err := newManager(cfg)
	if err != nil {
		return err
	}
	kinds, err := cfg.workloadKinds()
	if err != nil {
		return err
	}
	workload.Configure(kinds)
	checkWorkloadKinds(mgr.GetRESTMapper(), kinds)
	if err := workload.Watch(ctx, mgr.GetCache()); err != nil {
		return fmt.Errorf("set up owner metadata informers: %w", err)
	}
	defaults, err := cfg.PodDefaults()
	if err != nil {
		return err
	}
	history := podipam.HistoryOptions{Off: !cfg.AddressHistory || !historyServed(mgr.GetRESTMapper()),
		MaxEntries: cfg.AddressHistoryMaxEntries, MaxAge: cfg.AddressHistoryMaxAge}
	pods, err := podipam.Setup(mgr, ipam.New(), podipam.Options{Workers: cfg.Workers, MaxRetainTTL: cfg.MaxRetainTTL, PodSelector: selector, Defaults: defaults,
		History: history})
	if err != nil {
		return fmt.Errorf("set up pod addresses: %w", err)
	}
	if err := nodelabel.Setup(mgr); err != nil {
		return fmt.Errorf("set up node labels: %w", err)
	}
	if err := bgpstatus.Setup(mgr); err != nil {
		return fmt.Errorf("set up bgp status: %w", err)
	}
	if cfg.PolicyStatus {
		if err := policystatus.Setup(mgr); err != nil {
			return fmt.Errorf("set up policy status: %w", err)
		}
	}
	var serving <-chan struct{}
	if cfg.Webhook.Port != 0 {
		opts := webhook.Options{Bounds: netmodel.Bounds{MaxRetainTTL: cfg.MaxRetainTTL}, Scope: webhook.PodScope{Selector: selector}, Defaults: defaults}
		if serving, err = setupWebhook(ctx, mgr, cfg.Webhook, opts); err != nil {
			return fmt.Errorf("set up webhook: %w", err)
		}
	}
	if cfg.BootstrapDir != "" {
		if err := setupBootstrap(mgr, cfg.BootstrapDir, cfg.BootstrapOwner, serving); err != nil {
			return fmt.Errorf("set up bootstrap: %w", err)
		}
	}
	if err := setupMetrics(mgr, cfg); err != nil {
		return err
	}
	if err := addChecks(mgr, pods); err != nil {
		return err
	}
	log.Info("starting manager", "leaderElect", cfg.LeaderElect, "webhookPort", cfg.Webhook.Port)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("manager stopped: %w", err)
	}
	return nil
}

// newManager builds the controller-runtime manager the controllers share.
func newManager(cfg Config) (ctrlmanager.Manager, error) {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), estuaryv1.AddToScheme(scheme),
		npv1beta1.Install(scheme), npv1alpha1.Install(scheme)); err != nil {
		return nil, fmt.Errorf("build scheme: %w", err)
	}
	opts := ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOptions(),
		Metrics:                 metricsOptions(cfg),
		HealthProbeBindAddress:  cfg.ProbeAddr,
		PprofBindAddress:        cfg.PprofAddr,
		LeaderElection:          cfg.LeaderElect,
		LeaderElectionID:        LeaderElectionID,
		LeaderElectionNamespace: cfg.LeaderElectionNamespace,
		// A new leader must not allocate while the old one might: release
		// the lease on a clean stop, and otherwise wait it out.
		LeaderElectionReleaseOnCancel: true,
	}
	if cfg.Webhook.Port != 0 {
		opts.WebhookServer = ctrlwebhook.NewServer(ctrlwebhook.Options{Port: cfg.Webhook.Port, CertDir: cfg.Webhook.CertDir})
	}
	mgr, err := ctrl.NewManager(cfg.Kube, opts)
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	return mgr, nil
}

// metricsOptions serves /metrics on cfg.MetricsAddr and, with
// cfg.MetricsSecure, over HTTPS behind controller-runtime's TokenReview and
// SubjectAccessReview filter, without HTTP/2, which the endpoint does not
// need (HTTP/1.1 keeps it out of HTTP/2's stream-reset floods). The
// certificate is the rotated one of cfg.MetricsCert, read at each
// handshake, else a self-signed one made at start.
func metricsOptions(cfg Config) metricsserver.Options {
	o := metricsserver.Options{BindAddress: cfg.MetricsAddr}
	if cfg.MetricsSecure {
		o.SecureServing = true
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
		o.TLSOpts = []func(*tls.Config){func(c *tls.Config) { c.NextProtos = []string{"http/1.1"} }}
		if withCert := metricsCertTLS(cfg); withCert != nil {
			o.TLSOpts = append(o.TLSOpts, withCert)
		}
	}
	return o
}

// addChecks adds the liveness check (the informers still hear from the API
// server; a manager that never syncs is restarted) and the readiness check
// (the leader has rebuilt its allocator from the API; a follower waiting to
// lead serves nothing that could be wrong).
func addChecks(mgr ctrlmanager.Manager, pods *podipam.Reconciler) error {
	if err := mgr.AddHealthzCheck("informers", func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("informer caches have not synced")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("allocator", func(*http.Request) error {
		select {
		case <-mgr.Elected():
			return pods.Ready()
		default:
			return nil
		}
	}); err != nil {
		return fmt.Errorf("add readiness check: %w", err)
	}
	return nil
}

// setupWebhook registers the admission webhook, whose pod rules apply
// opts. With a certificate Secret, a rotator creates and renews the
// certificate and the webhook server starts once it is mounted. The
// replica is ready only once the server answers. The returned channel is
// closed once the handlers are registered.
func setupWebhook(ctx context.Context, mgr ctrlmanager.Manager, w WebhookConfig, opts webhook.Options) (<-chan struct{}, error) {
	var registered <-chan struct{}
	if w.Secret == "" {
		if err := webhook.Setup(ctx, mgr, opts); err != nil {
			return nil, err
		}
		done := make(chan struct{})
		close(done)
		registered = done
	} else {
		secret, err := w.secretName()
		if err != nil {
			return nil, err
		}
		registered, err = webhook.SetupWithRotation(ctx, mgr, webhook.CertRotation{
			Secret: secret, Service: w.Service, Configuration: w.Configuration, CertDir: w.CertDir,
		}, opts)
		if err != nil {
			return nil, err
		}
	}
	if err := mgr.AddReadyzCheck("webhook", webhook.ReadyCheck(mgr, registered)); err != nil {
		return nil, fmt.Errorf("add readiness check: %w", err)
	}
	return registered, nil
}

// setupBootstrap adds the leader's creator of the objects in dir. It starts
// once serving is closed (nil: at once) and retries each object until the
// API server accepts it: the webhook must first have a ready endpoint and
// its CA injected. Readiness does not wait for it, since the webhook's
// Service only sends requests to ready replicas.
func setupBootstrap(mgr ctrlmanager.Manager, dir, owner string, serving <-chan struct{}) error {
	objs, err := bootstrap.Load(dir)
	if err != nil {
		return err
	}
	c := &bootstrap.Creator{
		Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Objects: objs, Wait: serving,
		Events: mgr.GetEventRecorder("estuary-manager"), Log: ctrl.Log.WithName("bootstrap"),
	}
	if owner != "" {
		if c.Owner, err = bootstrap.ParseOwner(owner, mgr.GetRESTMapper()); err != nil {
			return err
		}
	}
	if err := mgr.Add(c); err != nil {
		return fmt.Errorf("add bootstrap: %w", err)
	}
	return nil
}
