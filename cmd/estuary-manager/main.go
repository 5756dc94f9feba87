// Command estuary-manager runs estuary's cluster-wide controllers: pod
// address allocation and release, StatefulSet address retention, and Subnet
// and Network status. One replica leads at a time (a Lease); the others wait.
package main

import (
	"context"
	"errors"
	"flag"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/controller/podipam"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

func main() {
	var (
		metricsAddr = flag.String("metrics-bind-address", ":8080", "address the metrics endpoint binds to")
		probeAddr   = flag.String("health-probe-bind-address", ":8081", "address the health probes bind to")
		leaderElect = flag.Bool("leader-elect", true, "elect a leader so that one replica allocates at a time")
		leaseNS     = flag.String("leader-election-namespace", "", "namespace of the leader Lease (default: the pod's)")
		workers     = flag.Int("workers", 4, "pods served in parallel")
		zapOpts     = zap.Options{}
	)
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), estuaryv1.AddToScheme(scheme)); err != nil {
		log.Error(err, "build scheme")
		os.Exit(1)
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:  *probeAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "estuary-manager",
		LeaderElectionNamespace: *leaseNS,
		// A new leader must not allocate while the old one might: release
		// the lease on a clean stop, and otherwise wait it out.
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		log.Error(err, "create manager")
		os.Exit(1)
	}
	pods, err := podipam.Setup(mgr, ipam.New(), podipam.Options{Workers: *workers})
	if err != nil {
		log.Error(err, "set up controllers")
		os.Exit(1)
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
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager stopped")
		os.Exit(1)
	}
}
