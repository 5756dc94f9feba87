package podipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/ipam"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

var (
	cfg    *rest.Config
	k8s    client.Client
	scheme *runtime.Scheme
)

func TestMain(m *testing.M) {
	// KubeVirt's and OpenKruise's CRDs (trimmed) for the kinds package
	// workload follows (vm_test.go).
	crds := []string{testenv.CRDDir, "internal/workload/testdata/crds"}
	os.Exit(testenv.Main(m, testenv.Options{CRDDirs: crds}, func(c *rest.Config, cl client.Client) (func(), error) {
		cfg, k8s, scheme = c, cl, cl.Scheme()
		return nil, nil
	}))
}

// startManager runs the controllers with a fresh allocator until the test
// (or the returned stop function) ends them, and waits for the rebuild.
// Given namespaces, it sees only the pods in them.
func startManager(t *testing.T, namespaces ...string) (stop func()) {
	t.Helper()
	r, stop := startManagerWith(t, testManager{rc: cfg, namespaces: namespaces})
	eventually(t, "allocator rebuilt", func() error { return r.Ready() })
	return stop
}

// testManager says how startManagerWith starts a manager.
type testManager struct {
	rc         *rest.Config
	namespaces []string                             // the pods it sees; empty: all
	client     func(client.WithWatch) client.Client // wraps its API client
	apiReader  func(client.Reader) client.Reader    // wraps the reconciler's live reader
	audit      time.Duration                        // its audit interval; 0: the default
	pods       labels.Selector                      // its --pod-label-selector; nil: every pod
	defaults   netmodel.Defaults                    // its cluster defaults
	history    HistoryOptions                       // its addresses' history
}

// startManagerWith starts the controllers as startManager does, as tm
// says, and returns at once.
func startManagerWith(t *testing.T, tm testManager) (*Reconciler, func()) {
	t.Helper()
	c, stop := startControllers(t, tm)
	return c.pods, stop
}

// startControllers is startManagerWith, returning both controllers.
func startControllers(t *testing.T, tm testManager) (*controllers, func()) {
	t.Helper()
	opts := ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Every test starts its own controllers with the same names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		// The manager's own trimming (internal/manager): every test runs
		// against pods as the production cache keeps them.
		Cache: cache.Options{
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject:         map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: TrimPod}},
		},
	}
	if len(tm.namespaces) > 0 {
		opts.Cache.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range tm.namespaces {
			opts.Cache.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	if tm.client != nil {
		opts.NewClient = func(c *rest.Config, o client.Options) (client.Client, error) {
			k, err := client.NewWithWatch(c, o)
			if err != nil {
				return nil, err
			}
			return tm.client(k), nil
		}
	}
	mgr, err := ctrl.NewManager(tm.rc, opts)
	if err != nil {
		t.Fatal(err)
	}
	c, err := setup(mgr, ipam.New(), Options{
		Workers: 4, Metrics: NewMetrics(prometheus.NewRegistry()),
		RetryExhausted: 500 * time.Millisecond, StatusInterval: 200 * time.Millisecond,
		AuditInterval: tm.audit, PodSelector: tm.pods, Defaults: tm.defaults, History: tm.history,
	}, tm.apiReader)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("manager: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return c, stop
}

// eventually retries check until it succeeds or 30 seconds pass.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	testenv.Eventually(t, what, 30*time.Second, check)
}

func bg() context.Context { return context.Background() }

// newNamespace creates a namespace for one test.
func newNamespace(t *testing.T, annotations map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-", Annotations: annotations}}
	if err := k8s.Create(bg(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// newNetwork creates a network and its subnets, removed when the test ends.
func newNetwork(t *testing.T, name string, spec estuaryv1.NetworkSpec, subnets map[string]estuaryv1.SubnetSpec) {
	t.Helper()
	n := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}
	if err := k8s.Create(bg(), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(bg(), n) })
	for sname, sspec := range subnets {
		sn := &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: sname}, Spec: sspec}
		if err := k8s.Create(bg(), sn); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(bg(), sn) })
	}
}

func overlay(t *testing.T, name string, cidrs ...string) {
	t.Helper()
	subnets := map[string]estuaryv1.SubnetSpec{}
	for i, c := range cidrs {
		v := int32(4)
		if netip.MustParsePrefix(c).Addr().Is6() {
			v = 6
		}
		subnets[fmt.Sprintf("%s-%d", name, i)] = estuaryv1.SubnetSpec{Network: name, Range: estuaryv1.AddressRange{Version: v, CIDR: c}}
	}
	newNetwork(t, name, estuaryv1.NetworkSpec{Type: estuaryv1.NetworkTypeOverlay, NetID: ptr.To[int64](7)}, subnets)
}

type podOpt func(*corev1.Pod)

func onNode(n string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }

func annotated(k, v string) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func ownedBy(sts *appsv1.StatefulSet) podOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: sts.Name, UID: sts.UID, Controller: ptr.To(true)}}
	}
}

func newPod(t *testing.T, ns, name string, opts ...podOpt) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
	}
	for _, o := range opts {
		o(p)
	}
	if err := k8s.Create(bg(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(bg(), podRef(p.Namespace, p.Name), client.GracePeriodSeconds(0)) })
	return p
}

// deletePod removes a pod at once, as a force delete does (no kubelet runs
// here to finish a graceful one).
func deletePod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if err := k8s.Delete(bg(), p, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	waitGone(t, "pod "+p.Name, p)
}

// waitGone waits until obj (read live) no longer exists.
func waitGone(t *testing.T, what string, obj client.Object) {
	t.Helper()
	eventually(t, what+" gone", func() error {
		err := k8s.Get(bg(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("get: %w", err)
		}
		return errors.New("still there")
	})
}

// instancesOf lists the pod name's IPInstances (read live).
func instancesOf(t *testing.T, ns, pod string) []estuaryv1.IPInstance {
	t.Helper()
	var list estuaryv1.IPInstanceList
	if err := k8s.List(bg(), &list, client.MatchingLabels{estuaryv1.LabelNamespace: ns, estuaryv1.LabelPod: pod}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// waitInstances waits until the pod name has n IPInstances in phase and
// returns them.
func waitInstances(t *testing.T, ns, pod string, n int, phase estuaryv1.IPInstancePhase) []estuaryv1.IPInstance {
	t.Helper()
	return waitRecords(t, fmt.Sprintf("%d %s address(es) for %s/%s", n, phase, ns, pod), n, phase,
		func() []estuaryv1.IPInstance { return instancesOf(t, ns, pod) })
}

// waitRecords waits until list returns n records, all in phase, and
// returns them.
func waitRecords(t *testing.T, what string, n int, phase estuaryv1.IPInstancePhase, list func() []estuaryv1.IPInstance) []estuaryv1.IPInstance {
	t.Helper()
	var got []estuaryv1.IPInstance
	eventually(t, what, func() error {
		got = list()
		if len(got) != n {
			return fmt.Errorf("%d records", len(got))
		}
		for _, ipi := range got {
			if ipi.Status.Phase != phase {
				return fmt.Errorf("%s is %s", ipi.Name, ipi.Status.Phase)
			}
		}
		return nil
	})
	return got
}

func addrOf(t *testing.T, ipi estuaryv1.IPInstance) netip.Addr {
	t.Helper()
	return netip.MustParsePrefix(ipi.Spec.Address.IP).Addr()
}

// subnetUsed reads a subnet's status.used.
func subnetUsed(name string) (int64, error) {
	sn := &estuaryv1.Subnet{}
	if err := k8s.Get(bg(), client.ObjectKey{Name: name}, sn); err != nil {
		return 0, err
	}
	return sn.Status.Used, nil
}

func waitUsed(t *testing.T, subnet string, want int64) {
	t.Helper()
	eventually(t, fmt.Sprintf("subnet %s used=%d", subnet, want), func() error {
		got, err := subnetUsed(subnet)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("used=%d", got)
		}
		return nil
	})
}

func podRef(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
}
