// Command estuary-manager runs estuary's cluster-wide controllers: pod
// address allocation and release, StatefulSet address retention, Subnet
// and Network status, and Node labels naming each node's networks and their
// free capacity. One replica leads at a time (a Lease); the others wait.
// With --webhook-port it also serves the admission webhook, on every replica.
// With --bootstrap-dir the leader creates the objects in that directory
// (the release's default Network and Subnets) that do not exist yet, once
// its webhook serves (see internal/bootstrap).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/bootstrap"
	"github.com/estuary-cni/estuary/internal/controller/bgpstatus"
	"github.com/estuary-cni/estuary/internal/controller/nodelabel"
	"github.com/estuary-cni/estuary/internal/controller/podipam"
	"github.com/estuary-cni/estuary/internal/webhook"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

func main() {
	var (
		metricsAddr = flag.String("metrics-bind-address", ":8080", "address the metrics endpoint binds to")
		probeAddr   = flag.String("health-probe-bind-address", ":8081", "address the health probes bind to")
		leaderElect = flag.Bool("leader-elect", true, "elect a leader so that one replica allocates at a time")
		leaseNS     = flag.String("leader-election-namespace", "", "namespace of the leader Lease (default: the pod's)")
		workers     = flag.Int("workers", 4, "pods served in parallel")
		webhookPort = flag.Int("webhook-port", 0, "port the admission webhook serves on; 0 disables the webhook")
		webhookCfg  = webhookFlags{}
		bootDir     = flag.String("bootstrap-dir", "", "directory of YAML objects the leader creates when absent, never updating existing ones (after the webhook serves); empty: none")
		bootOwner   = flag.String("bootstrap-owner", "", "cluster-scoped object, <kind>.<group>/<name>, that owns every bootstrap object created, so deleting it deletes them; empty: none")
		zapOpts     = zap.Options{}
	)
	flag.StringVar(&webhookCfg.certDir, "webhook-cert-dir", "", "directory holding the webhook's tls.crt and tls.key (default: controller-runtime's)")
	flag.StringVar(&webhookCfg.secret, "webhook-cert-secret", "", "namespace/name of an existing Secret in which to create and rotate the webhook's certificate; it must be mounted at --webhook-cert-dir (required with it). Empty: the certificate in --webhook-cert-dir is provided")
	flag.StringVar(&webhookCfg.service, "webhook-service", "estuary-webhook", "the webhook's Service, in the namespace of --webhook-cert-secret, named in its certificate")
	flag.StringVar(&webhookCfg.configuration, "webhook-configuration", webhook.ConfigurationName, "name of the validating and mutating webhook configurations the CA is injected into")
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), estuaryv1.AddToScheme(scheme)); err != nil {
		log.Error(err, "build scheme")
		os.Exit(1)
	}
	opts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:  *probeAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "estuary-manager",
		LeaderElectionNamespace: *leaseNS,
		// A new leader must not allocate while the old one might: release
		// the lease on a clean stop, and otherwise wait it out.
		LeaderElectionReleaseOnCancel: true,
	}
	if *webhookPort != 0 {
		opts.WebhookServer = ctrlwebhook.NewServer(ctrlwebhook.Options{Port: *webhookPort, CertDir: webhookCfg.certDir})
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), opts)
	if err != nil {
		log.Error(err, "create manager")
		os.Exit(1)
	}
	pods, err := podipam.Setup(mgr, ipam.New(), podipam.Options{Workers: *workers})
	if err != nil {
		log.Error(err, "set up controllers")
		os.Exit(1)
	}
	if err := nodelabel.Setup(mgr); err != nil {
		log.Error(err, "set up node labels")
		os.Exit(1)
	}
	if err := bgpstatus.Setup(mgr); err != nil {
		log.Error(err, "set up bgp status")
		os.Exit(1)
	}
	ctx := ctrl.SetupSignalHandler()
	var serving <-chan struct{}
	if *webhookPort != 0 {
		if serving, err = setupWebhook(ctx, mgr, webhookCfg); err != nil {
			log.Error(err, "set up webhook")
			os.Exit(1)
		}
	}
	if *bootDir != "" {
		if err := setupBootstrap(mgr, *bootDir, *bootOwner, serving); err != nil {
			log.Error(err, "set up bootstrap")
			os.Exit(1)
		}
	}
	// Live while the manager still hears from the API server: its informers
	// have synced (a manager that never syncs is restarted).
	if err := mgr.AddHealthzCheck("informers", func(r *http.Request) error {
		ctx, cancel := context.WithTimeout(r.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("informer caches have not synced")
		}
		return nil
	}); err != nil {
		log.Error(err, "add health check")
		os.Exit(1)
	}
	// Ready once this replica has rebuilt the allocator from the API (or is
	// a follower waiting to lead, which serves nothing that could be wrong).
	if err := mgr.AddReadyzCheck("allocator", func(*http.Request) error {
		select {
		case <-mgr.Elected():
			return pods.Ready()
		default:
			return nil
		}
	}); err != nil {
		log.Error(err, "add readiness check")
		os.Exit(1)
	}
	log.Info("starting manager")
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

type webhookFlags struct {
	certDir, secret, service, configuration string
}

// setupWebhook registers the admission webhook. With a certificate Secret,
// a rotator creates and renews the certificate and the webhook server starts
// once it is mounted. The replica is ready only once the server answers.
// The returned channel is closed once the handlers are registered.
func setupWebhook(ctx context.Context, mgr manager.Manager, f webhookFlags) (<-chan struct{}, error) {
	var registered <-chan struct{}
	if f.secret == "" {
		if err := webhook.Setup(ctx, mgr); err != nil {
			return nil, err
		}
		done := make(chan struct{})
		close(done)
		registered = done
	} else {
		ns, name, ok := strings.Cut(f.secret, "/")
		if !ok {
			return nil, fmt.Errorf("--webhook-cert-secret %q: want namespace/name", f.secret)
		}
		var err error
		registered, err = webhook.SetupWithRotation(ctx, mgr, webhook.CertRotation{
			Secret:  types.NamespacedName{Namespace: ns, Name: name},
			Service: f.service, Configuration: f.configuration, CertDir: f.certDir,
		})
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
func setupBootstrap(mgr manager.Manager, dir, owner string, serving <-chan struct{}) error {
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
