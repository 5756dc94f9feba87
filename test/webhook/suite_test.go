package webhook

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/webhook"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

var (
	// k8s talks to the API server directly, so every write goes through
	// the webhook.
	k8s client.Client
	// cached reads the manager's cache: what the webhook sees.
	cached client.Client
	// restConfig reaches the API server.
	restConfig *rest.Config
	// installed is where envtest serves the suite's webhook from, with
	// its certificate, for tests that start a server of their own.
	installed *envtest.WebhookInstallOptions
)

func TestMain(m *testing.M) {
	validating, mutating := configurations()
	hooks := &envtest.WebhookInstallOptions{
		ValidatingWebhooks: []*admissionregistrationv1.ValidatingWebhookConfiguration{validating},
		MutatingWebhooks:   []*admissionregistrationv1.MutatingWebhookConfiguration{mutating},
	}
	os.Exit(testenv.Main(m, testenv.Options{Strict: true, Webhooks: hooks}, func(cfg *rest.Config, c client.Client) (func(), error) {
		restConfig, k8s, installed = cfg, c, hooks
		ctx, cancel := context.WithCancel(context.Background())
		stopped, err := startManager(ctx, hooks)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("start webhook: %w", err)
		}
		return func() {
			cancel()
			<-stopped
		}, nil
	}))
}

// configurations are the webhook's own configurations, pointed at the
// local server: envtest turns a service path into https://host:port/<path>,
// so the leading slash is dropped. Namespaces labelled defaultsLabel are
// left to the server of defaults_test.go.
func configurations() (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	validating, mutating := webhook.Configurations(webhook.Service{Namespace: "estuary-system", Name: "estuary-webhook", Port: 443})
	trim := func(cc *admissionregistrationv1.WebhookClientConfig) {
		p := strings.TrimPrefix(*cc.Service.Path, "/")
		cc.Service.Path = &p
	}
	for i := range validating.Webhooks {
		trim(&validating.Webhooks[i].ClientConfig)
		skipDefaults(validating.Webhooks[i].NamespaceSelector)
	}
	for i := range mutating.Webhooks {
		trim(&mutating.Webhooks[i].ClientConfig)
		skipDefaults(mutating.Webhooks[i].NamespaceSelector)
	}
	return validating, mutating
}

// startManager runs a manager serving the webhook with envtest's serving
// certificate and returns once the server answers and the caches are warm.
func startManager(ctx context.Context, opts *envtest.WebhookInstallOptions) (<-chan struct{}, error) {
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                 k8s.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: ctrlwebhook.NewServer(ctrlwebhook.Options{
			Host: opts.LocalServingHost, Port: opts.LocalServingPort, CertDir: opts.LocalServingCertDir,
		}),
	})
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	if err := webhook.Setup(ctx, mgr, webhook.Options{}); err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	cached = mgr.GetClient()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "manager stopped: %v\n", err)
		}
	}()
	started := mgr.GetWebhookServer().StartedChecker()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return started(&http.Request{}) == nil, nil
	})
	if err != nil {
		return stopped, fmt.Errorf("webhook server did not start: %w", err)
	}
	return stopped, warmCaches(ctx)
}

// warmCaches starts the informers the webhook reads, so the first request
// does not wait for them.
func warmCaches(ctx context.Context) error {
	lists := []client.ObjectList{&estuaryv1.NetworkList{}, &estuaryv1.SubnetList{}, &estuaryv1.IPInstanceList{}}
	for _, l := range lists {
		if err := cached.List(ctx, l); err != nil {
			return fmt.Errorf("warm cache: %w", err)
		}
	}
	return nil
}

// ctx returns a context bounded so that a hung API call fails the test
// instead of stalling the suite.
func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// seed creates objs in order, each admitted, and waits until the webhook's
// cache holds them. They are deleted in reverse order when the test ends,
// each gone from the cache before the next is deleted, so that the guarded
// deletes see their dependants gone.
func seed(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, obj := range objs {
		if err := k8s.Create(ctx(t), obj); err != nil {
			t.Fatalf("seed %T %s: %v", obj, obj.GetName(), err)
		}
		t.Cleanup(func() { remove(t, obj) })
		waitCached(t, obj)
	}
}

// remove deletes obj and waits until the cache no longer has it (a
// namespace is only marked for deletion: no controller finishes it here).
func remove(t *testing.T, obj client.Object) {
	t.Helper()
	// A pod bound to a node is gone only at once: no kubelet confirms it.
	if err := k8s.Delete(ctx(t), obj, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete %T %s: %v", obj, obj.GetName(), err)
		return
	}
	if _, ok := obj.(*corev1.Namespace); ok {
		return
	}
	key, probe := client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)
	err := wait.PollUntilContextTimeout(ctx(t), 10*time.Millisecond, 10*time.Second, true, func(c context.Context) (bool, error) {
		return apierrors.IsNotFound(cached.Get(c, key, probe)), nil
	})
	if err != nil {
		t.Errorf("%T %s still cached after delete: %v", obj, obj.GetName(), err)
	}
}

// waitCached waits until the cache holds obj at its current resource
// version.
func waitCached(t *testing.T, obj client.Object) {
	t.Helper()
	key, probe := client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)
	err := wait.PollUntilContextTimeout(ctx(t), 10*time.Millisecond, 10*time.Second, true, func(c context.Context) (bool, error) {
		err := cached.Get(c, key, probe)
		return err == nil && probe.GetResourceVersion() == obj.GetResourceVersion(), nil
	})
	if err != nil {
		t.Fatalf("%T %s not cached: %v", obj, obj.GetName(), err)
	}
}

// requireDenied asserts the API server refused the write through the
// webhook with a message holding every one of want.
func requireDenied(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted; want a denial saying %q", want)
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Fatalf("error is neither Forbidden nor Invalid (%v): %v", apierrors.ReasonForError(err), err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("denial does not say %q: %v", w, err)
		}
	}
}
