// Command estuary-scale is the driver of make scale (hack/scale.sh): it
// measures estuary on a running lab with fake nodes run by kwok. See
// test/infra/lab/scale.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab/scale"
)

func main() {
	cfg := scale.Config{Out: os.Stdout}
	// A flag set of its own: controller-runtime registers --kubeconfig on
	// the default one.
	fs := flag.NewFlagSet("estuary-scale", flag.ExitOnError)
	fs.StringVar(&cfg.Kubeconfig, "kubeconfig", "", "the lab's admin kubeconfig")
	fs.IntVar(&cfg.Nodes, "nodes", 1000, "fake nodes")
	fs.IntVar(&cfg.Pods, "pods", 50000, "pods")
	fs.IntVar(&cfg.PodsPerDeployment, "pods-per-deployment", 100, "pods per Deployment")
	fs.StringVar(&cfg.Namespace, "namespace", "scale", "namespace of the pods")
	fs.StringVar(&cfg.Kwok, "kwok", "", "the kwok binary (hack/kwok.sh)")
	fs.StringVar(&cfg.KwokStages, "kwok-stages", "", "kwok's stage configuration (hack/kwok.sh)")
	fs.StringVar(&cfg.KwokLog, "kwok-log", "kwok.log", "where kwok logs")
	fs.StringVar(&cfg.NodeNetns, "node-netns", "estlab-node-1", "network namespace of the real node")
	fs.StringVar(&cfg.NodeAddr, "node-addr", "10.77.0.11", "address of the real node")
	fs.IntVar(&cfg.ManagerMetrics, "manager-metrics-port", 9780, "the manager's metrics port")
	fs.IntVar(&cfg.ManagerHealth, "manager-health-port", 9781, "the manager's health port")
	fs.IntVar(&cfg.DaemonMetrics, "daemon-metrics-port", 9783, "the daemon's metrics port")
	fs.StringVar(&cfg.SystemNamespace, "system-namespace", "kube-system", "namespace estuary runs in")
	fs.IntVar(&cfg.ManagerQPS, "manager-qps", 0, "the manager's API client rate, burst twice that (0: the chart's)")
	fs.IntVar(&cfg.ManagerWorkers, "manager-workers", 0, "the manager's --workers (0: the chart's)")
	fs.StringVar(&cfg.ManagerMemory, "manager-memory", "", "the manager's memory limit, e.g. 1Gi (empty: the chart's)")
	fs.BoolVar(&cfg.ManagerWatchList, "manager-watch-list", false, "stream the manager's informers' initial state (client-go's WatchListClient) instead of one list")
	fs.IntVar(&cfg.Records, "records", 0, "IPInstances for the manager's cold start: reservations top up what the storms leave (0: none added)")
	fs.StringVar(&cfg.ProfileDir, "profile-dir", "", "where a CPU profile of kube-apiserver taken in each large wave is written (empty: none)")
	fs.DurationVar(&cfg.Timeout, "timeout", 2*time.Hour, "give up after this long")
	_ = fs.Parse(os.Args[1:])
	if cfg.Kubeconfig == "" || cfg.Kwok == "" || cfg.KwokStages == "" || cfg.Nodes < 1 || cfg.Pods < 10 || cfg.PodsPerDeployment < 1 || cfg.Records < 0 {
		fmt.Fprintln(os.Stderr, "estuary-scale: --kubeconfig, --kwok and --kwok-stages are required; --nodes >= 1, --pods >= 10, --records >= 0")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := scale.Run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "estuary-scale:", err)
		os.Exit(1)
	}
}
