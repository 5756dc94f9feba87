package chart

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/estuary-cni/estuary/internal/webhook"
)

// allowedName asks the authorizer whether user may do a to the named
// object (no name: the collection).
func allowedName(t *testing.T, user string, a named) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace, Name: a.name,
		},
	}}
	if err := k8s.Create(ctx(t), sar); err != nil {
		t.Fatalf("access review %s for %s: %v", a, user, err)
	}
	return sar.Status.Allowed
}

// TestRotatorWithChartRBAC runs the webhook's certificate rotator as the
// manager's service account, with nothing but the chart's RBAC, against the
// chart's own Secret and configurations: it must fill the Secret and inject
// its CA into both configurations. The configurations' rules are narrowed
// to a resource that does not exist, so that they decide no request of the
// other tests while they exist.
func TestRotatorWithChartRBAC(t *testing.T) {
	ensureNamespace(t)
	objs := render(t)
	installRBAC(t, objs)
	for _, kind := range []string{"Secret", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"} {
		name := webhookSecret
		if kind != "Secret" {
			name = webhook.ConfigurationName
		}
		obj := find(t, objs, kind, name).DeepCopy()
		if kind != "Secret" {
			narrowRules(t, obj)
		}
		if err := k8s.Create(ctx(t), obj); err != nil {
			t.Fatalf("create %s %s: %v", kind, name, err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	}

	cfg := rest.CopyConfig(restConfig)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:estuary-manager", namespace),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: k8s.Scheme(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	_, err = webhook.AddCertRotator(mgr, webhook.CertRotation{
		Secret:  types.NamespacedName{Namespace: namespace, Name: webhookSecret},
		Service: webhookService, Configuration: webhook.ConfigurationName, CertDir: t.TempDir(),
	})
	if err != nil {
		t.Fatalf("add rotator: %v", err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() { cancel(); <-stopped })
	go func() {
		defer close(stopped)
		if err := mgr.Start(runCtx); err != nil {
			t.Errorf("manager as estuary-manager: %v", err)
		}
	}()

	secret := &corev1.Secret{}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	var last string
	err = wait.PollUntilContextTimeout(ctx(t), 100*time.Millisecond, 25*time.Second, true, func(c context.Context) (bool, error) {
		if err := k8s.Get(c, client.ObjectKey{Namespace: namespace, Name: webhookSecret}, secret); err != nil {
			return false, err
		}
		if err := k8s.Get(c, client.ObjectKey{Name: webhook.ConfigurationName}, v); err != nil {
			return false, err
		}
		if err := k8s.Get(c, client.ObjectKey{Name: webhook.ConfigurationName}, m); err != nil {
			return false, err
		}
		ca := string(secret.Data["ca.crt"])
		last = fmt.Sprintf("Secret keys %d, validating caBundle %d bytes, mutating caBundle %d bytes",
			len(secret.Data), len(v.Webhooks[0].ClientConfig.CABundle), len(m.Webhooks[0].ClientConfig.CABundle))
		return ca != "" && len(secret.Data["tls.crt"]) > 0 && injected(v.Webhooks[len(v.Webhooks)-1].ClientConfig.CABundle, ca) &&
			injected(m.Webhooks[0].ClientConfig.CABundle, ca), nil
	})
	if err != nil {
		t.Fatalf("the rotator, with the chart's RBAC only, did not fill Secret %s and inject its CA into both %s configurations: %v (%s)",
			webhookSecret, webhook.ConfigurationName, err, last)
	}
}

func injected(bundle []byte, ca string) bool { return string(bundle) == ca }

// narrowRules points every rule of a rendered webhook configuration at a
// resource that does not exist.
func narrowRules(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	hooks, _, _ := unstructured.NestedSlice(obj.Object, "webhooks")
	for i := range hooks {
		h := hooks[i].(map[string]any)
		h["rules"] = []any{map[string]any{
			"operations": []any{"CREATE"}, "apiGroups": []any{"nothing.example"},
			"apiVersions": []any{"v1"}, "resources": []any{"nothings"},
		}}
	}
	if err := unstructured.SetNestedSlice(obj.Object, hooks, "webhooks"); err != nil {
		t.Fatal(err)
	}
}
