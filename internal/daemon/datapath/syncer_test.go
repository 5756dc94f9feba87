package datapath

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/remote"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// fakeDataplane records what the loop asks of the kernel. The loop's own
// logic is what is under test here; the kernel side has its own tests in
// internal/dataplane/overlay and the lab's end-to-end suite.
type fakeDataplane struct {
	mu       sync.Mutex
	inputs   []overlay.Input
	failNext int
	answered []string
}

func (f *fakeDataplane) ResolveParent(overlay.ParentSpec) (overlay.Parent, error) {
	return overlay.Parent{Link: "eth0", IP: netip.MustParseAddr("10.77.0.11"), MTU: 1500,
		Prefixes: []netip.Prefix{netip.MustParsePrefix("10.77.0.11/24")}}, nil
}

func (f *fakeDataplane) Apply(_ context.Context, in overlay.Input) (desired.Plan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failNext > 0 {
		f.failNext--
		return desired.Plan{}, errors.New("injected failure")
	}
	f.inputs = append(f.inputs, in)
	return desired.Plan{}, nil
}

func (f *fakeDataplane) Refresh(string, func(netip.Addr) (desired.MAC, bool)) (int, error) {
	return 0, nil
}

func (f *fakeDataplane) Answer(ctx context.Context, device string, _ func(netip.Addr) (desired.MAC, bool)) error {
	f.mu.Lock()
	f.answered = append(f.answered, device)
	f.mu.Unlock()
	<-ctx.Done()
	return nil
}

func (f *fakeDataplane) last() (overlay.Input, int, []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.inputs) == 0 {
		return overlay.Input{}, 0, nil
	}
	return f.inputs[len(f.inputs)-1], len(f.inputs), append([]string(nil), f.answered...)
}

type fakeEndpoints struct {
	mu  sync.Mutex
	eps []endpointstore.Endpoint
}

func (f *fakeEndpoints) List() ([]endpointstore.Endpoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]endpointstore.Endpoint(nil), f.eps...), nil
}

func (f *fakeEndpoints) set(eps ...endpointstore.Endpoint) {
	f.mu.Lock()
	f.eps = eps
	f.mu.Unlock()
}

func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func startEnv(t testing.TB) (client.Client, *testCaches, *runtime.Scheme) {
	t.Helper()
	cfg, k8s, c, scheme := startEnvConfig(t)
	return k8s, &testCaches{Cache: c, cfg: cfg}, scheme
}

// testCaches are a loop's two caches over one API server, as the daemon's:
// the objects (the embedded cache) and the records of nodes other than the
// loop's (remote.NewCache), which newTestLoop makes for the loop's node.
// Start starts both.
type testCaches struct {
	cache.Cache
	cfg     *rest.Config
	records cache.Cache
}

func (c *testCaches) Start(ctx context.Context) error {
	if c.records != nil {
		go func() { _ = c.records.Start(ctx) }()
	}
	return c.Cache.Start(ctx)
}

// recordsCache is remote.NewCache's cache of the records of nodes other
// than node, not started.
func recordsCache(t testing.TB, cfg *rest.Config, node string) cache.Cache {
	t.Helper()
	c, err := remote.NewCache(cfg, node)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startEnvConfig starts envtest with the CRDs of config/crd and returns its
// config, a client, a cache (not started) and their scheme.
func startEnvConfig(t testing.TB) (*rest.Config, client.Client, cache.Cache, *runtime.Scheme) {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make test`")
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "..", "config", "crd")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop()
		t.Fatalf("start envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), estuaryv1.AddToScheme(scheme), npv1beta1.Install(scheme)); err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, k8s, c, scheme
}

func create(t *testing.T, k8s client.Client, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(context.Background(), o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
}

func TestSyncerPublishesAppliesAndFollowsChanges(t *testing.T) {
	k8s, c, _ := startEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dp := &fakeDataplane{failNext: 1}
	eps := &fakeEndpoints{}
	m := NewMetrics()
	s := newTestLoop(ctx, t, testOptions{Node: "node-a", Port: 8472, Log: logr.Discard(), Metrics: m}, dp, c, k8s, eps)
	go func() { _ = c.Start(ctx) }()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	a, b := objtest.Node("node-a", "", "", "10.77.0.11"), objtest.Node("node-b", "10.77.0.12", "0e:00:00:00:00:0b", "10.77.0.12")
	create(t, k8s, &a, &b)
	ovl := objtest.Network("overlay", estuaryv1.NetworkTypeOverlay, 4)
	yes := true
	sn := objtest.Subnet("overlay-v4", "overlay", "10.78.0.0/16", &yes)
	sn.Spec.Range.Version = 4
	create(t, k8s, &ovl, &sn)

	eventually(t, "node-a publishes its tunnel endpoint", func() error {
		var n corev1.Node
		if err := k8s.Get(ctx, client.ObjectKey{Name: "node-a"}, &n); err != nil {
			return err
		}
		ip, mac := n.Annotations[estuaryv1.AnnotationVTEPIP], n.Annotations[estuaryv1.AnnotationVTEPMAC]
		if ip != "10.77.0.11" || mac != overlay.StableMAC("node-a").String() {
			return fmt.Errorf("annotations %q %q", ip, mac)
		}
		return nil
	})
	eventually(t, "an input with node-b as remote and the subnet, after the injected failure", func() error {
		in, n, answered := dp.last()
		if n == 0 || len(in.Remotes) != 1 || in.Remotes[0].Node != "node-b" || len(in.Subnets) != 1 ||
			in.Device != overlay.DeviceName(4) || in.VNI != 4 || in.Port != 8472 || in.MTU != overlay.MTUFor(1500, false) {
			return fmt.Errorf("last input %+v", in)
		}
		if len(answered) != 1 || answered[0] != overlay.DeviceName(4) {
			return fmt.Errorf("answerer started for %v", answered)
		}
		return nil
	})
	eventually(t, "the injected Apply failure counted as a failed pass under part overlay", func() error {
		passes, failures := reconcileCounts(t, m)
		if failures[PartOverlay] < 1 || passes["error"] < 1 {
			return fmt.Errorf("passes %v, failures %v", passes, failures)
		}
		return nil
	})

	ipi := objtest.Instance("10.78.0.7/32", "node-b", estuaryv1.IPInstanceBound)
	ipi.Name = "10.78.0.7"
	ipi.Spec.Network, ipi.Spec.Subnet, ipi.Spec.Address.Version = "overlay", "overlay-v4", 4
	ipi.Spec.Binding = estuaryv1.Binding{Namespace: "default", Owner: estuaryv1.OwnerReference{Kind: "Pod", Name: "p", UID: "u"}, PodName: "p"}
	create(t, k8s, &ipi)
	eventually(t, "a pod address on node-b resolves to node-b's tunnel MAC", func() error {
		if m, ok := s.overlay.Lookup(netip.MustParseAddr("10.78.0.7")); !ok || m != desired.MustParseMAC("0e:00:00:00:00:0b") {
			return fmt.Errorf("lookup = %s, %v", m, ok)
		}
		return nil
	})

	eps.set(endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: "c", IfName: "eth0"}, IPs: []string{"10.78.0.3/32"}})
	s.trigger.Poke()
	eventually(t, "a recorded local pod reaches the input", func() error {
		in, _, _ := dp.last()
		if len(in.LocalPods) != 1 || in.LocalPods[0] != netip.MustParseAddr("10.78.0.3") {
			return fmt.Errorf("local pods %v", in.LocalPods)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
}
