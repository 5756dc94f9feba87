//go:build integration

package integration

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/estuary-cni/estuary/internal/controller/podipam"
	"github.com/estuary-cni/estuary/internal/daemon"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// Benchmark variants of env_test.go's helpers: they keep the controllers'
// and the daemon's logs out of the benchmark's output.

// logTail keeps the last part of the controllers' and the daemon's log, so
// a benchmark's output holds only its results unless it fails.
type logTail struct {
	mu  sync.Mutex
	buf []byte
}

const logTailMax = 256 << 10

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if len(l.buf) > 2*logTailMax {
		l.buf = append(l.buf[:0], l.buf[len(l.buf)-logTailMax:]...)
	}
	return len(p), nil
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

var (
	benchLog     = &logTail{}
	benchLogOnce sync.Once
)

// quietLogs sends controller-runtime's log (the manager's and the daemon's)
// to benchLog and prints it if tb fails. controller-runtime takes only the
// first logger it is given, so this is done once per process.
func quietLogs(tb testing.TB) {
	tb.Helper()
	benchLogOnce.Do(func() {
		ctrl.SetLogger(zap.New(zap.WriteTo(benchLog), zap.UseDevMode(true)))
	})
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("end of the manager's and the daemon's log:\n%s", benchLog)
		}
	})
}

// benchAPIServer is startAPIServer over testing.TB; the logger is set by
// quietLogs.
func benchAPIServer(tb testing.TB, scheme *runtime.Scheme) (*rest.Config, client.Client) {
	tb.Helper()
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join("..", "..", "config", "crd")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	tb.Cleanup(func() {
		if err := env.Stop(); err != nil {
			tb.Errorf("stop envtest: %v", err)
		}
	})
	if err != nil {
		tb.Fatalf("start envtest: %v", err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		tb.Fatal(err)
	}
	return cfg, k8s
}

// benchManager is startManager over testing.TB.
func benchManager(tb testing.TB, cfg *rest.Config, scheme *runtime.Scheme) {
	tb.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
	})
	if err != nil {
		tb.Fatal(err)
	}
	r, err := podipam.Setup(mgr, ipam.New(), podipam.Options{
		Workers: 2, Metrics: podipam.NewMetrics(prometheus.NewRegistry()),
		StatusInterval: 200 * time.Millisecond,
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("manager: %v", err)
		}
	})
	eventually(tb, "manager rebuilt its allocator", 30*time.Second, r.Ready)
}

// benchDaemon is startDaemon over testing.TB: daemon.Run until tb ends.
func benchDaemon(tb testing.TB, cfg daemon.Config) {
	tb.Helper()
	ctx, cancel := context.WithCancel(bg())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, cfg) }()
	stopped := false
	tb.Cleanup(func() {
		if stopped {
			return
		}
		cancel()
		select {
		case err := <-done:
			if err != nil {
				tb.Errorf("daemon stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			tb.Error("daemon did not stop within 30s")
		}
	})
	eventually(tb, "daemon socket", 10*time.Second, func() error {
		select {
		case err := <-done:
			stopped = true
			tb.Fatalf("daemon stopped at start: %v", err)
		default:
		}
		_, err := os.Stat(filepath.Join(cfg.CNIConfDir, daemon.ConflistName))
		return err
	})
}
