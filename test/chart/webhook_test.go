package chart

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/estuary-cni/estuary/internal/bootstrap"
	"github.com/estuary-cni/estuary/internal/webhook"
)

// Names the chart gives the webhook's objects.
const (
	webhookService = "estuary-webhook"
	webhookSecret  = "estuary-webhook-cert"
	bootstrapOwner = "estuary-bootstrap"
)

// bootstrapped returns the objects of the rendered bootstrap ConfigMap, in
// the order the manager creates them, read as the manager reads them.
func bootstrapped(t *testing.T, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	var cm corev1.ConfigMap
	convert(t, find(t, objs, "ConfigMap", "estuary-bootstrap"), &cm)
	if len(cm.Data) != 1 || cm.Data["default-network.yaml"] == "" {
		t.Fatalf("ConfigMap estuary-bootstrap data keys %v, want default-network.yaml", len(cm.Data))
	}
	out, err := bootstrap.Decode([]byte(cm.Data["default-network.yaml"]))
	if err != nil {
		t.Fatalf("ConfigMap estuary-bootstrap: %v", err)
	}
	return out
}

// wantConfigurations are internal/webhook's configurations for the chart's
// Service, as the chart renders them (the rotator injects caBundle).
func wantConfigurations(svc webhook.Service) (*admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration) {
	svc.Namespace, svc.Name, svc.Port = namespace, webhookService, 443
	return webhook.Configurations(svc)
}

// TestWebhookConfigurations: the rendered configurations are exactly the
// ones internal/webhook builds (names, paths, rules, selectors, policies),
// without a caBundle, with the pod failure policy and timeouts from values.
func TestWebhookConfigurations(t *testing.T) {
	cases := map[string]struct {
		args []string
		svc  webhook.Service
	}{
		"defaults": {nil, webhook.Service{PodFailurePolicy: admissionregistrationv1.Ignore, TimeoutSeconds: 10, PodTimeoutSeconds: 5}},
		"pods fail closed": {[]string{"--set", "webhook.pods.failurePolicy=Fail,webhook.pods.timeoutSeconds=3,webhook.timeoutSeconds=7"},
			webhook.Service{PodFailurePolicy: admissionregistrationv1.Fail, TimeoutSeconds: 7, PodTimeoutSeconds: 3}},
	}
	for name, c := range cases {
		objs := render(t, c.args...)
		wantV, wantM := wantConfigurations(c.svc)
		var v admissionregistrationv1.ValidatingWebhookConfiguration
		var m admissionregistrationv1.MutatingWebhookConfiguration
		convert(t, find(t, objs, "ValidatingWebhookConfiguration", webhook.ConfigurationName), &v)
		convert(t, find(t, objs, "MutatingWebhookConfiguration", webhook.ConfigurationName), &m)
		if !equality.Semantic.DeepEqual(v.Webhooks, wantV.Webhooks) {
			t.Errorf("%s: ValidatingWebhookConfiguration webhooks\n%+v\nwant (internal/webhook.Configurations)\n%+v", name, v.Webhooks, wantV.Webhooks)
		}
		if !equality.Semantic.DeepEqual(m.Webhooks, wantM.Webhooks) {
			t.Errorf("%s: MutatingWebhookConfiguration webhooks\n%+v\nwant (internal/webhook.Configurations)\n%+v", name, m.Webhooks, wantM.Webhooks)
		}
		for _, w := range v.Webhooks {
			if *w.FailurePolicy != admissionregistrationv1.Fail && w.Name != "pod.validate.estuary.io" {
				t.Errorf("%s: webhook %s failurePolicy %s, want Fail", name, w.Name, *w.FailurePolicy)
			}
		}
	}
	// values.schema.json refuses it naming the value; without the schema,
	// the template does.
	if _, err := renderErr(t, "--set", "webhook.pods.failurePolicy=Sometimes"); err == nil || !strings.Contains(err.Error(), "/webhook/pods/failurePolicy") {
		t.Errorf("failurePolicy Sometimes rendered (%v); want an error naming /webhook/pods/failurePolicy", err)
	}
	if _, err := renderErr(t, "--skip-schema-validation", "--set", "webhook.pods.failurePolicy=Sometimes"); err == nil || !strings.Contains(err.Error(), "webhook.pods.failurePolicy") {
		t.Errorf("failurePolicy Sometimes rendered without the schema (%v); want an error naming webhook.pods.failurePolicy", err)
	}
}

// TestWebhookWiring: the Service reaches the manager's webhook port, the
// Secret is empty and mounted where --webhook-cert-dir says, the flags name
// the rendered objects, and the bootstrap ConfigMap and owner are the ones
// the bootstrap flags name.
func TestWebhookWiring(t *testing.T) {
	objs := render(t, "--set", "webhook.port=9555")
	var d appsv1.Deployment
	convert(t, find(t, objs, "Deployment", "estuary-manager"), &d)
	c := d.Spec.Template.Spec.Containers[0]
	for _, a := range []string{"--webhook-port=9555", "--webhook-cert-dir=/var/run/estuary/webhook-certs",
		"--webhook-cert-secret=" + namespace + "/" + webhookSecret, "--webhook-service=" + webhookService,
		"--webhook-configuration=" + webhook.ConfigurationName, "--bootstrap-dir=/etc/estuary/bootstrap",
		"--bootstrap-owner=ClusterRole.rbac.authorization.k8s.io/" + bootstrapOwner} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("manager args %v lack %s", c.Args, a)
		}
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "webhook" && p.ContainerPort == 9555 }) {
		t.Errorf("manager ports %+v lack webhook 9555", c.Ports)
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.Name] = m.MountPath
		if !m.ReadOnly {
			t.Errorf("volume %s mounted writable", m.Name)
		}
	}
	for _, v := range d.Spec.Template.Spec.Volumes {
		switch {
		case v.Secret != nil && v.Secret.SecretName == webhookSecret:
			if mounts[v.Name] != "/var/run/estuary/webhook-certs" {
				t.Errorf("Secret %s mounted at %q, not --webhook-cert-dir", webhookSecret, mounts[v.Name])
			}
		case v.ConfigMap != nil && v.ConfigMap.Name == "estuary-bootstrap":
			if mounts[v.Name] != "/etc/estuary/bootstrap" {
				t.Errorf("ConfigMap estuary-bootstrap mounted at %q, not --bootstrap-dir", mounts[v.Name])
			}
		case v.Secret != nil && v.Secret.SecretName == metricsCertSecret:
			// The metrics certificate: metrics_test.go checks it.
		default:
			t.Errorf("unexpected volume %+v", v)
		}
	}
	if len(mounts) != 3 {
		t.Errorf("manager mounts %v, want the webhook's and the metrics' certificates and the bootstrap objects", mounts)
	}
	if d.Spec.Template.Spec.SecurityContext.FSGroup == nil || *d.Spec.Template.Spec.SecurityContext.FSGroup != 65532 {
		t.Error("no fsGroup 65532: the manager cannot read its mounted certificate")
	}

	var svc corev1.Service
	convert(t, find(t, objs, "Service", webhookService), &svc)
	if svc.Namespace != namespace || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 ||
		svc.Spec.Ports[0].TargetPort.String() != "webhook" || svc.Spec.Selector["app.kubernetes.io/name"] != "estuary-manager" ||
		d.Spec.Template.Labels["app.kubernetes.io/name"] != "estuary-manager" {
		t.Errorf("Service %s: %+v does not reach the manager's webhook port", webhookService, svc.Spec)
	}
	var secret corev1.Secret
	convert(t, find(t, objs, "Secret", webhookSecret), &secret)
	if len(secret.Data) != 0 || len(secret.StringData) != 0 || secret.Type != corev1.SecretTypeOpaque {
		t.Errorf("Secret %s carries data or type %q: the chart must ship no certificate", webhookSecret, secret.Type)
	}
	var owner rbacv1.ClusterRole
	convert(t, find(t, objs, "ClusterRole", bootstrapOwner), &owner)
	if len(owner.Rules) != 0 {
		t.Errorf("ClusterRole %s grants %v; it only owns the bootstrap objects", bootstrapOwner, owner.Rules)
	}
	if d.Spec.Template.Annotations["checksum/bootstrap"] == "" {
		t.Error("no checksum/bootstrap annotation: changed default network values would not restart the manager")
	}
}

// TestWebhookDisabled: webhook.enabled=false renders no webhook object,
// flag or grant; the default network is still bootstrapped.
func TestWebhookDisabled(t *testing.T) {
	objs := render(t, "--set", "webhook.enabled=false")
	for _, o := range objs {
		switch {
		case o.GetKind() == "ValidatingWebhookConfiguration", o.GetKind() == "MutatingWebhookConfiguration",
			o.GetKind() == "Service" && !strings.HasSuffix(o.GetName(), "-metrics"), o.GetKind() == "Secret" && o.GetName() != metricsCertSecret,
			o.GetName() == "estuary-manager-webhook":
			t.Errorf("webhook.enabled=false rendered %s %s", o.GetKind(), o.GetName())
		}
	}
	var d appsv1.Deployment
	convert(t, find(t, objs, "Deployment", "estuary-manager"), &d)
	if slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--webhook-") }) {
		t.Errorf("webhook.enabled=false: manager args %v", d.Spec.Template.Spec.Containers[0].Args)
	}
	var cr rbacv1.ClusterRole
	convert(t, find(t, objs, "ClusterRole", "estuary-manager"), &cr)
	for _, r := range cr.Rules {
		if slices.Contains(r.APIGroups, "admissionregistration.k8s.io") {
			t.Errorf("webhook.enabled=false: ClusterRole estuary-manager grants %+v", r)
		}
	}
	if len(bootstrapped(t, objs)) != 2 {
		t.Error("webhook.enabled=false: the default network is not bootstrapped")
	}
}

// named is an access to one object.
type named struct {
	access
	name string
}

func (n named) String() string { return n.access.String() + " named " + n.name }

// TestManagerWebhookGrants asks the authorizer what the manager may do with
// the webhook's Secret and configurations and the bootstrap owner, by name.
func TestManagerWebhookGrants(t *testing.T) {
	ensureNamespace(t)
	installRBAC(t, render(t))
	const adm = "admissionregistration.k8s.io"
	user := fmt.Sprintf("system:serviceaccount:%s:estuary-manager", namespace)
	allowedNamed := []named{
		{access{"get", "", "secrets", "", namespace}, webhookSecret}, {access{"update", "", "secrets", "", namespace}, webhookSecret},
		{access{"patch", "", "secrets", "", namespace}, webhookSecret}, {access{"list", "", "secrets", "", namespace}, webhookSecret},
		{access{"watch", "", "secrets", "", namespace}, webhookSecret},
		{access{"get", adm, "validatingwebhookconfigurations", "", ""}, webhook.ConfigurationName},
		{access{"patch", adm, "validatingwebhookconfigurations", "", ""}, webhook.ConfigurationName},
		{access{"update", adm, "mutatingwebhookconfigurations", "", ""}, webhook.ConfigurationName},
		{access{"watch", adm, "mutatingwebhookconfigurations", "", ""}, webhook.ConfigurationName},
		{access{"get", "rbac.authorization.k8s.io", "clusterroles", "", ""}, bootstrapOwner},
		{access{"create", estuaryGroup, "networks", "", ""}, ""}, {access{"create", estuaryGroup, "subnets", "", ""}, ""},
	}
	deniedNamed := []named{
		{access{"get", "", "secrets", "", namespace}, "other"}, {access{"update", "", "secrets", "", namespace}, "other"},
		{access{"list", "", "secrets", "", namespace}, ""}, {access{"watch", "", "secrets", "", namespace}, ""},
		{access{"get", "", "secrets", "", "default"}, webhookSecret}, {access{"update", "", "secrets", "", "default"}, webhookSecret},
		{access{"delete", "", "secrets", "", namespace}, webhookSecret}, {access{"create", "", "secrets", "", namespace}, ""},
		{access{"patch", adm, "validatingwebhookconfigurations", "", ""}, "other"},
		{access{"update", adm, "mutatingwebhookconfigurations", "", ""}, "other"},
		{access{"list", adm, "validatingwebhookconfigurations", "", ""}, ""},
		{access{"delete", adm, "validatingwebhookconfigurations", "", ""}, webhook.ConfigurationName},
		{access{"create", adm, "mutatingwebhookconfigurations", "", ""}, ""},
		{access{"get", "rbac.authorization.k8s.io", "clusterroles", "", ""}, "estuary-manager"},
		{access{"update", "rbac.authorization.k8s.io", "clusterroles", "", ""}, bootstrapOwner},
		{access{"update", estuaryGroup, "subnets", "", ""}, "overlay-v4"}, {access{"delete", estuaryGroup, "networks", "", ""}, "overlay"},
	}
	for _, a := range allowedNamed {
		if !allowedName(t, user, a) {
			t.Errorf("estuary-manager may not %s; the chart must grant it", a)
		}
	}
	for _, a := range deniedNamed {
		if allowedName(t, user, a) {
			t.Errorf("estuary-manager may %s; the chart must not grant it", a)
		}
	}
}
