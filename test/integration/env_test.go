//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/controller/podipam"
	"github.com/estuary-cni/estuary/internal/daemon"
	"github.com/estuary-cni/estuary/pkg/ipam"
	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// nodeName is the node the daemon serves; pods scheduled there get served.
const nodeName = "node-a"

func bg() context.Context { return context.Background() }

// requirements skips the test unless it runs as root with envtest's binaries.
func requirements(t testing.TB) {
	t.Helper()
	nstest.RequireRoot(t)
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Skip("KUBEBUILDER_ASSETS is not set: it must name a directory with etcd and kube-apiserver (make test sets it)")
	}
}

// startAPIServer runs etcd and kube-apiserver with estuary's CRDs until the
// test ends. With quiet, controller-runtime's log (the manager's and the
// daemon's) goes to benchLog, shown only if tb fails (see quietLogs);
// otherwise to stderr.
func startAPIServer(tb testing.TB, quiet bool) (*rest.Config, client.Client) {
	tb.Helper()
	if quiet {
		quietLogs(tb)
	} else {
		ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	}
	cfg, k8s, stop, err := testenv.Start(testenv.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := stop(); err != nil {
			tb.Errorf("stop envtest: %v", err)
		}
	})
	return cfg, k8s
}

// startManager runs the manager's pod IPAM controllers in-process until the
// test ends, and waits until they serve pods.
func startManager(t testing.TB, cfg *rest.Config, scheme *runtime.Scheme) {
	t.Helper()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		// Each test of the package runs its own manager in this process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r, err := podipam.Setup(mgr, ipam.New(), podipam.Options{
		Workers: 2, Metrics: podipam.NewMetrics(prometheus.NewRegistry()),
		StatusInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	testenv.Eventually(t, "manager rebuilt its allocator", 30*time.Second, r.Ready)
}

// overlay creates an Overlay network with one IPv4 subnet.
func overlay(t testing.TB, k8s client.Client, name, cidr string) {
	t.Helper()
	n := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, NetID: ptr.To[int64](4242)}}
	sn := &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: name + "-v4"},
		Spec: estuaryv1.SubnetSpec{Network: name, Range: estuaryv1.AddressRange{Version: 4, CIDR: cidr}}}
	for _, o := range []client.Object{n, sn} {
		if err := k8s.Create(bg(), o); err != nil {
			t.Fatalf("create %s: %v", o.GetName(), err)
		}
	}
}

// newPod creates a pod scheduled on nodeName in a fresh namespace. No
// kubelet runs: the pod only exists in the API.
func newPod(t testing.TB, k8s client.Client, name string) *corev1.Pod {
	t.Helper()
	return newAnnotatedPod(t, k8s, name, nil)
}

// newAnnotatedPod is newPod with the pod's annotations.
func newAnnotatedPod(t testing.TB, k8s client.Client, name string, annotations map[string]string) *corev1.Pod {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-"}}
	if err := k8s.Create(bg(), ns); err != nil {
		t.Fatal(err)
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name, Annotations: annotations},
		Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
	}
	if err := k8s.Create(bg(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// instances lists the pod's IPInstances, read live from the API server.
func instances(k8s client.Client, p *corev1.Pod) ([]estuaryv1.IPInstance, error) {
	var list estuaryv1.IPInstanceList
	err := k8s.List(bg(), &list, client.MatchingLabels{estuaryv1.LabelNamespace: p.Namespace, estuaryv1.LabelPod: p.Name})
	return list.Items, err
}

// boundAddress waits for the pod's one Bound IPInstance and returns it.
func boundAddress(t testing.TB, k8s client.Client, p *corev1.Pod) estuaryv1.IPInstance {
	t.Helper()
	return boundAddresses(t, k8s, p, 1)[0]
}

// boundAddresses waits for the pod's n IPInstances, all Bound, and returns
// them.
func boundAddresses(t testing.TB, k8s client.Client, p *corev1.Pod, n int) []estuaryv1.IPInstance {
	t.Helper()
	var got []estuaryv1.IPInstance
	testenv.Eventually(t, "ipinstances of pod "+p.Name, 30*time.Second, func() error {
		list, err := instances(k8s, p)
		switch {
		case err != nil:
			return err
		case len(list) != n:
			return fmt.Errorf("%d ipinstances, want %d", len(list), n)
		}
		for _, ipi := range list {
			if ipi.Status.Phase != estuaryv1.IPInstanceBound {
				return fmt.Errorf("ipinstance %s is %q", ipi.Name, ipi.Status.Phase)
			}
		}
		got = list
		return nil
	})
	return got
}

// fakeHost makes the namespace the daemon treats as the node's: lo up and an
// uplink address (10.99.0.1/24 on lan0) for host-originated traffic.
func fakeHost(t testing.TB) string {
	t.Helper()
	host := nstest.New(t)
	ipCmd(t, host, "link", "set", "lo", "up")
	ipCmd(t, host, "link", "add", "lan0", "type", "veth", "peer", "name", "lan0p")
	ipCmd(t, host, "link", "set", "lan0", "up")
	ipCmd(t, host, "link", "set", "lan0p", "up")
	ipCmd(t, host, "addr", "add", "10.99.0.1/24", "dev", "lan0")
	return host
}

// ipCmd runs `ip -n <ns> args...` and returns its output.
func ipCmd(t testing.TB, ns string, args ...string) string {
	t.Helper()
	out, err := tryIP(ns, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func tryIP(ns string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"-n", filepath.Base(ns)}, args...)...).CombinedOutput() // #nosec G204 -- test
	if err != nil {
		return string(out), fmt.Errorf("ip -n %s %s: %w: %s", filepath.Base(ns), strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// buildCNI builds the real estuary-cni binary as it is shipped (the
// Makefile's build target and the lab's image build use the same flags).
func buildCNI(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "estuary-cni")
	cmd := exec.Command("go", "build", "-trimpath", "-tags", "grpcnotrace", "-ldflags=-s -w", "-o", bin,
		"../../cmd/estuary-cni") // #nosec G204 -- test
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build estuary-cni: %v\n%s", err, out)
	}
	return bin
}

// freeAddr returns a loopback TCP address nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// startDaemon runs daemon.Run against the fake host namespace with every
// path under a temporary directory; stop ends it and returns Run's result.
func startDaemon(t testing.TB, cfg daemon.Config) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(bg())
	done := make(chan error, 1)
	go func() { done <- daemon.Run(ctx, cfg) }()
	var result error
	stopped := false
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			select {
			case result = <-done:
			case <-time.After(30 * time.Second):
				result = errors.New("daemon did not stop within 30s")
			}
		}
		return result
	}
	t.Cleanup(func() { _ = stop() })
	testenv.Eventually(t, "daemon socket", 10*time.Second, func() error {
		select {
		case err := <-done:
			stopped = true
			t.Fatalf("daemon stopped at start: %v", err)
		default:
		}
		_, err := os.Stat(filepath.Join(cfg.CNIConfDir, daemon.ConflistName))
		return err
	})
	return stop
}
