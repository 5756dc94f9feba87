package chart

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/estuary-cni/estuary/internal/testenv"
)

// The chart's metrics files, as the templates read them.
const (
	rulesFile     = chartDir + "/files/prometheus-rules.yaml"
	dashboardFile = chartDir + "/files/grafana-dashboard.json"
)

// monitorsValues turns on every optional metrics object.
var monitorsValues = []string{
	"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.podMonitor.enabled=true",
	"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.dashboard.enabled=true",
	"--set-json", `metrics.readers=[{"kind":"ServiceAccount","name":"prometheus","namespace":"monitoring"}]`,
}

// TestMetricsServedSecurelyByDefault: by default both components serve
// /metrics over HTTPS on every node address (the manager with
// --metrics-secure, the daemon on its own port beside the loopback health
// server), each behind a headless Service whose port reaches the
// container's, and no monitor, rule or dashboard is rendered.
func TestMetricsServedSecurelyByDefault(t *testing.T) {
	objs := render(t)
	var d appsv1.Deployment
	convert(t, find(t, objs, "Deployment", "estuary-manager"), &d)
	mc := &d.Spec.Template.Spec.Containers[0]
	wantArgs(t, "manager", mc.Args, []string{"--metrics-bind-address=:9780", "--metrics-secure=true"}, nil)
	var ds appsv1.DaemonSet
	convert(t, find(t, objs, "DaemonSet", "estuary-daemon"), &ds)
	dc := &ds.Spec.Template.Spec.Containers[0]
	wantArgs(t, "daemon", dc.Args, []string{"--metrics-bind-address=:9783", "--health-probe-bind-address=127.0.0.1:9782"}, nil)
	for svc, pod := range map[string]corev1.PodTemplateSpec{"estuary-manager-metrics": d.Spec.Template, "estuary-daemon-metrics": ds.Spec.Template} {
		checkMetricsService(t, objs, svc, pod)
	}
	for _, o := range objs {
		if k := o.GetKind(); k == "ServiceMonitor" || k == "PodMonitor" || k == "PrometheusRule" || o.GetName() == "estuary-grafana-dashboard" {
			t.Errorf("rendered %s %s by default", k, o.GetName())
		}
	}
}

// checkMetricsService: the Service is headless, selects pod, and its port
// targets the container's metrics port.
func checkMetricsService(t *testing.T, objs []*unstructured.Unstructured, name string, pod corev1.PodTemplateSpec) {
	t.Helper()
	var s corev1.Service
	convert(t, find(t, objs, "Service", name), &s)
	if s.Spec.ClusterIP != corev1.ClusterIPNone || s.Labels["networking.estuary.io/metrics"] != "true" ||
		!labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) {
		t.Errorf("Service %s: clusterIP %q labels %v selector %v; want headless, the metrics label, selecting %v",
			name, s.Spec.ClusterIP, s.Labels, s.Spec.Selector, pod.Labels)
	}
	if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Name != "metrics" || s.Spec.Ports[0].TargetPort.StrVal != "metrics" {
		t.Fatalf("Service %s: ports %+v; want one named metrics targeting metrics", name, s.Spec.Ports)
	}
	i := slices.IndexFunc(pod.Spec.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" })
	if i < 0 || pod.Spec.Containers[0].Ports[i].ContainerPort != s.Spec.Ports[0].Port {
		t.Errorf("Service %s: port %d; the container's metrics port is %+v", name, s.Spec.Ports[0].Port, pod.Spec.Containers[0].Ports)
	}
}

func wantArgs(t *testing.T, what string, args, want, unwanted []string) {
	t.Helper()
	for _, a := range want {
		if !slices.Contains(args, a) {
			t.Errorf("%s: args %v lack %s", what, args, a)
		}
	}
	for _, a := range args {
		for _, u := range unwanted {
			if strings.HasPrefix(a, u) {
				t.Errorf("%s: args %v have %s", what, args, a)
			}
		}
	}
}

// TestMetricsLoopbackWhenNotSecure: metrics.secure=false serves plain
// /metrics on the nodes' loopback, as before: no HTTPS endpoint, Service or
// review rights; and a monitor cannot be asked for then.
func TestMetricsLoopbackWhenNotSecure(t *testing.T) {
	objs := render(t, "--set", "metrics.secure=false")
	var d appsv1.Deployment
	convert(t, find(t, objs, "Deployment", "estuary-manager"), &d)
	wantArgs(t, "manager", d.Spec.Template.Spec.Containers[0].Args, []string{"--metrics-bind-address=127.0.0.1:9780", "--metrics-secure=false"}, nil)
	var ds appsv1.DaemonSet
	convert(t, find(t, objs, "DaemonSet", "estuary-daemon"), &ds)
	dc := ds.Spec.Template.Spec.Containers[0]
	wantArgs(t, "daemon", dc.Args, []string{"--health-probe-bind-address=127.0.0.1:9782"}, []string{"--metrics-bind-address"})
	if slices.ContainsFunc(dc.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" }) {
		t.Errorf("daemon: ports %+v name a metrics port", dc.Ports)
	}
	for _, o := range objs {
		if strings.HasPrefix(o.GetName(), "estuary-metrics") || strings.HasSuffix(o.GetName(), "-metrics") {
			t.Errorf("metrics.secure=false rendered %s %s", o.GetKind(), o.GetName())
		}
	}
	_, err := renderErr(t, "--set", "metrics.secure=false", "--set", "metrics.serviceMonitor.enabled=true")
	if err == nil || !strings.Contains(err.Error(), "need metrics.secure") {
		t.Errorf("a ServiceMonitor without metrics.secure: %v; want refused", err)
	}
}

// TestMetricsRBAC installs the chart's RBAC with the monitors' scraper
// and a reader and asks the API server's authorizer: both components may
// create TokenReviews and SubjectAccessReviews and may not read /metrics;
// the scraper and the reader may get /metrics and nothing else asked.
func TestMetricsRBAC(t *testing.T) {
	ensureNamespace(t)
	objs := render(t, monitorsValues...)
	var auth rbacv1.ClusterRole
	convert(t, find(t, objs, "ClusterRole", "estuary-metrics-auth"), &auth)
	if len(auth.Rules) != 2 {
		t.Errorf("estuary-metrics-auth rules %+v; want tokenreviews and subjectaccessreviews create only", auth.Rules)
	}
	installRBAC(t, objs)
	for _, sa := range []string{"estuary-manager", "estuary-daemon"} {
		user := fmt.Sprintf("system:serviceaccount:%s:%s", namespace, sa)
		for _, a := range []access{{"create", "authentication.k8s.io", "tokenreviews", "", ""}, {"create", "authorization.k8s.io", "subjectaccessreviews", "", ""}} {
			if !allowed(t, user, a) {
				t.Errorf("%s may not %s", sa, a)
			}
		}
		for _, a := range []access{{"get", "authentication.k8s.io", "tokenreviews", "", ""}, {"create", "authorization.k8s.io", "localsubjectaccessreviews", "", "default"}} {
			if allowed(t, user, a) {
				t.Errorf("%s may %s", sa, a)
			}
		}
		if allowedPath(t, user, "get", "/metrics") {
			t.Errorf("%s may get /metrics", sa)
		}
	}
	for _, user := range []string{"system:serviceaccount:" + namespace + ":estuary-metrics-scraper", "system:serviceaccount:monitoring:prometheus"} {
		testenv.Eventually(t, user+" may get /metrics", 30*time.Second, func() error {
			if !allowedPath(t, user, "get", "/metrics") {
				return fmt.Errorf("%s may not get /metrics", user)
			}
			return nil
		})
		for _, p := range []string{"/healthz/etcd", "/api"} {
			if allowedPath(t, user, "post", p) {
				t.Errorf("%s may post %s", user, p)
			}
		}
		if allowed(t, user, access{"get", "", "secrets", "", namespace}) || allowed(t, user, access{"list", "", "pods", "", ""}) {
			t.Errorf("%s may read secrets or pods", user)
		}
	}
}

func allowedPath(t *testing.T, user, verb, path string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: []string{"system:authenticated"},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Verb: verb, Path: path},
	}}
	if err := k8s.Create(ctx(t), sar); err != nil {
		t.Fatalf("access review %s %s for %s: %v", verb, path, user, err)
	}
	return sar.Status.Allowed
}

// TestMonitorsRender renders every metrics toggle on: the ServiceMonitor,
// PodMonitor and PrometheusRule decode strictly into Prometheus Operator's
// monitoring.coreos.com/v1 types and scrape what the Services and pods
// serve, over HTTPS with a bearer token; the PrometheusRule carries the
// rule file; the dashboard ConfigMap carries the dashboard for Grafana's
// sidecar; the built-in objects are accepted by the API server.
func TestMonitorsRender(t *testing.T) {
	ensureNamespace(t)
	objs := render(t, monitorsValues...)
	var sm monitoringv1.ServiceMonitor
	convert(t, find(t, objs, "ServiceMonitor", "estuary"), &sm)
	for _, svc := range []string{"estuary-manager-metrics", "estuary-daemon-metrics"} {
		s := find(t, objs, "Service", svc)
		if !labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(s.GetLabels())) ||
			!strings.HasPrefix(svc, s.GetLabels()[sm.Spec.JobLabel]) {
			t.Errorf("ServiceMonitor selector %v jobLabel %s; Service %s labels %v", sm.Spec.Selector, sm.Spec.JobLabel, svc, s.GetLabels())
		}
	}
	if len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("ServiceMonitor endpoints %+v", sm.Spec.Endpoints)
	}
	ep := sm.Spec.Endpoints[0]
	if ep.Port != "metrics" || ptrString(ep.Scheme) != "https" || ep.Path != "/metrics" || !scraperToken(ep.Authorization) ||
		ep.TLSConfig == nil || !insecure(&ep.TLSConfig.SafeTLSConfig) {
		t.Errorf("ServiceMonitor endpoint %+v; want https on port metrics with the scraper's token, unverified", ep)
	}
	if err := ep.Validate(); err != nil {
		t.Errorf("ServiceMonitor endpoint: %v", err)
	}

	var pm monitoringv1.PodMonitor
	convert(t, find(t, objs, "PodMonitor", "estuary"), &pm)
	sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"Deployment", "DaemonSet"} {
		for _, o := range objs {
			if o.GetKind() != kind {
				continue
			}
			podLabels, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
			if o.GetNamespace() == namespace && strings.HasPrefix(o.GetName(), "estuary-") && !sel.Matches(labels.Set(podLabels)) {
				t.Errorf("PodMonitor selector %v misses %s %s's pods %v", pm.Spec.Selector, kind, o.GetName(), podLabels)
			}
		}
	}
	if len(pm.Spec.PodMetricsEndpoints) != 1 {
		t.Fatalf("PodMonitor endpoints %+v", pm.Spec.PodMetricsEndpoints)
	}
	pep := pm.Spec.PodMetricsEndpoints[0]
	if ptrString(pep.Port) != "metrics" || ptrString(pep.Scheme) != "https" || !scraperToken(pep.Authorization) || !insecure(pep.TLSConfig) {
		t.Errorf("PodMonitor endpoint %+v; want https on port metrics with the scraper's token, unverified", pep)
	}
	if err := pep.Validate(); err != nil {
		t.Errorf("PodMonitor endpoint: %v", err)
	}
	var tok corev1.Secret
	convert(t, find(t, objs, "Secret", "estuary-metrics-scraper-token"), &tok)
	if tok.Type != corev1.SecretTypeServiceAccountToken || tok.Annotations[corev1.ServiceAccountNameKey] != "estuary-metrics-scraper" {
		t.Errorf("scraper token Secret: type %s annotations %v", tok.Type, tok.Annotations)
	}

	checkRuleObject(t, find(t, objs, "PrometheusRule", "estuary"))
	checkDashboardObject(t, find(t, objs, "ConfigMap", "estuary-grafana-dashboard"))
	for _, o := range objs {
		if strings.HasPrefix(o.GetAPIVersion(), "monitoring.coreos.com/") {
			continue // no Prometheus Operator CRDs here: decoded strictly above
		}
		if err := k8s.Create(ctx(t), o.DeepCopy(), client.DryRunAll); err != nil {
			t.Errorf("%s %s refused: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

// checkRuleObject: the PrometheusRule's spec is the rule file.
func checkRuleObject(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	var pr monitoringv1.PrometheusRule
	convert(t, o, &pr)
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var file monitoringv1.PrometheusRuleSpec
	if err := yaml.UnmarshalStrict(b, &file); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	got, _ := yaml.Marshal(pr.Spec)
	want, _ := yaml.Marshal(file)
	if string(got) != string(want) || len(file.Groups) == 0 {
		t.Errorf("PrometheusRule spec differs from %s:\n%s\nwant:\n%s", rulesFile, got, want)
	}
}

// checkDashboardObject: the ConfigMap carries the dashboard file, labelled
// for Grafana's sidecar.
func checkDashboardObject(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	var cm corev1.ConfigMap
	convert(t, o, &cm)
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	if cm.Labels["grafana_dashboard"] != "1" || cm.Data["estuary.json"] != strings.TrimSuffix(string(b), "\n") {
		t.Errorf("dashboard ConfigMap labels %v, estuary.json of %d bytes; want grafana_dashboard=1 and %s (%d bytes)",
			cm.Labels, len(cm.Data["estuary.json"]), dashboardFile, len(b))
	}
}

// scraperToken: a is the bearer token of the chart's scraper.
func scraperToken(a *monitoringv1.SafeAuthorization) bool {
	return a != nil && a.Type == "Bearer" && a.Credentials != nil &&
		a.Credentials.Name == "estuary-metrics-scraper-token" && a.Credentials.Key == "token"
}

func insecure(c *monitoringv1.SafeTLSConfig) bool {
	return c != nil && c.InsecureSkipVerify != nil && *c.InsecureSkipVerify
}

func ptrString[T ~string](p *T) string {
	if p == nil {
		return ""
	}
	return string(*p)
}
