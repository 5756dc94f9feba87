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

	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// The chart's metrics files, as the templates read them.
const (
	rulesFile     = chartDir + "/files/prometheus-rules.yaml"
	dashboardFile = chartDir + "/files/grafana-dashboard.json"
)

// monitorsValues turns on every optional metrics object, for a Prometheus
// running as monitoring/prometheus-k8s with the scrape class kube-token,
// and binds a second scraper as a reader.
var monitorsValues = []string{
	"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.podMonitor.enabled=true",
	"--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.dashboard.enabled=true",
	"--set", "metrics.prometheus.serviceAccount.name=prometheus-k8s", "--set", "metrics.prometheus.serviceAccount.namespace=monitoring",
	"--set", "metrics.prometheus.scrapeClass=kube-token",
	"--set-json", `metrics.readers=[{"kind":"ServiceAccount","name":"vmagent","namespace":"monitoring"}]`,
}

// The chart's metrics certificate objects.
const (
	metricsCertSecret = "estuary-metrics-cert"
	metricsCAConfig   = "estuary-metrics-ca"
)

// TestMetricsServedSecurelyByDefault: by default both components serve
// /metrics over HTTPS on every node address (the manager with
// --metrics-secure, the daemon on its own port beside the loopback health
// server) with the manager's rotated certificate, each behind a headless
// Service whose port reaches the container's, and no monitor, rule or
// dashboard is rendered.
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
	checkMetricsCertMounts(t, objs, &d, &ds)
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

// TestMetricsRBAC installs the chart's RBAC with Prometheus's
// ServiceAccount and a reader and asks the API server's authorizer: both
// components may create TokenReviews and SubjectAccessReviews and may not
// read /metrics; Prometheus and the reader may get /metrics and nothing
// else asked. The chart keeps no token: no ServiceAccount token Secret,
// no ServiceAccount of its own for scraping.
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
	for _, o := range objs {
		if o.GetKind() == "Secret" && o.Object["type"] == string(corev1.SecretTypeServiceAccountToken) || o.GetName() == "estuary-metrics-scraper" {
			t.Errorf("the chart renders %s %s: no token of its own is kept", o.GetKind(), o.GetName())
		}
	}
	for _, user := range []string{"system:serviceaccount:monitoring:prometheus-k8s", "system:serviceaccount:monitoring:vmagent"} {
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

// TestMonitorsRender renders every metrics toggle on: a ServiceMonitor and
// a PodMonitor per component decode strictly into Prometheus Operator's
// monitoring.coreos.com/v1 types and scrape what that component's Service
// and pods serve, over HTTPS verified with the CA of the ConfigMap the
// manager publishes and the Service's name, with Prometheus's own token
// from the scrape class (no credentials in the monitors); the
// PrometheusRule carries the rule file; the dashboard ConfigMap carries the
// dashboard for Grafana's sidecar; the built-in objects are accepted by the
// API server.
func TestMonitorsRender(t *testing.T) {
	ensureNamespace(t)
	objs := render(t, monitorsValues...)
	for _, c := range []struct{ component, svc, owner string }{
		{"manager", "estuary-manager-metrics", "Deployment"}, {"daemon", "estuary-daemon-metrics", "DaemonSet"},
	} {
		name := "estuary-" + c.component
		serverName := c.svc + "." + namespace + ".svc"
		var sm monitoringv1.ServiceMonitor
		convert(t, find(t, objs, "ServiceMonitor", name), &sm)
		svc := find(t, objs, "Service", c.svc)
		if !labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(svc.GetLabels())) ||
			svc.GetLabels()[sm.Spec.JobLabel] != name || ptrString(sm.Spec.ScrapeClassName) != "kube-token" {
			t.Errorf("ServiceMonitor %s selector %v jobLabel %s scrapeClass %v; Service %s labels %v", name, sm.Spec.Selector, sm.Spec.JobLabel, sm.Spec.ScrapeClassName, c.svc, svc.GetLabels())
		}
		for _, other := range objs {
			if other.GetKind() == "Service" && other.GetName() != c.svc && labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(other.GetLabels())) {
				t.Errorf("ServiceMonitor %s also selects Service %s", name, other.GetName())
			}
		}
		if len(sm.Spec.Endpoints) != 1 {
			t.Fatalf("ServiceMonitor %s endpoints %+v", name, sm.Spec.Endpoints)
		}
		ep := sm.Spec.Endpoints[0]
		tokenFile := ep.BearerTokenFile //nolint:staticcheck // SA1019: checks the deprecated field stays unset with a scrape class
		if ep.Port != "metrics" || ptrString(ep.Scheme) != "https" || ep.Path != "/metrics" || tokenFile != "" || ep.Authorization != nil ||
			ep.TLSConfig == nil || !verified(&ep.TLSConfig.SafeTLSConfig, serverName) {
			t.Errorf("ServiceMonitor %s endpoint %+v; want https on port metrics verified as %s, credentials from the scrape class", name, ep, serverName)
		}
		if err := ep.Validate(); err != nil {
			t.Errorf("ServiceMonitor %s endpoint: %v", name, err)
		}

		var pm monitoringv1.PodMonitor
		convert(t, find(t, objs, "PodMonitor", name), &pm)
		sel, err := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		podLabels, _, _ := unstructured.NestedStringMap(find(t, objs, c.owner, name).Object, "spec", "template", "metadata", "labels")
		if !sel.Matches(labels.Set(podLabels)) || ptrString(pm.Spec.ScrapeClassName) != "kube-token" {
			t.Errorf("PodMonitor %s selector %v scrapeClass %v; %s %s's pods %v", name, pm.Spec.Selector, pm.Spec.ScrapeClassName, c.owner, name, podLabels)
		}
		if len(pm.Spec.PodMetricsEndpoints) != 1 {
			t.Fatalf("PodMonitor %s endpoints %+v", name, pm.Spec.PodMetricsEndpoints)
		}
		pep := pm.Spec.PodMetricsEndpoints[0]
		if ptrString(pep.Port) != "metrics" || ptrString(pep.Scheme) != "https" || pep.Authorization != nil || !verified(pep.TLSConfig, serverName) {
			t.Errorf("PodMonitor %s endpoint %+v; want https on port metrics verified as %s, credentials from the scrape class", name, pep, serverName)
		}
		if err := pep.Validate(); err != nil {
			t.Errorf("PodMonitor %s endpoint: %v", name, err)
		}
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

// TestServiceMonitorTokenFileWithoutScrapeClass: without a scrape class the
// ServiceMonitors name the Prometheus pod's own projected token file.
func TestServiceMonitorTokenFileWithoutScrapeClass(t *testing.T) {
	objs := render(t, "--set", "metrics.serviceMonitor.enabled=true",
		"--set", "metrics.prometheus.serviceAccount.name=prometheus-k8s", "--set", "metrics.prometheus.serviceAccount.namespace=monitoring")
	for _, name := range []string{"estuary-manager", "estuary-daemon"} {
		var sm monitoringv1.ServiceMonitor
		convert(t, find(t, objs, "ServiceMonitor", name), &sm)
		ep := sm.Spec.Endpoints[0]
		tokenFile := ep.BearerTokenFile //nolint:staticcheck // SA1019: the only token-file field of a ServiceMonitor endpoint
		if sm.Spec.ScrapeClassName != nil || tokenFile != "/var/run/secrets/kubernetes.io/serviceaccount/token" || ep.Authorization != nil {
			t.Errorf("ServiceMonitor %s: scrapeClass %v, endpoint %+v; want the token file", name, sm.Spec.ScrapeClassName, ep)
		}
	}
}

// TestMonitorValuesRefused: the monitors are refused, with the value to
// set named, without an identity for Prometheus, with a ServiceAccount
// without namespace, and (a PodMonitor) without a scrape class.
func TestMonitorValuesRefused(t *testing.T) {
	sa := []string{"--set", "metrics.prometheus.serviceAccount.name=prometheus-k8s", "--set", "metrics.prometheus.serviceAccount.namespace=monitoring"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "metrics.serviceMonitor.enabled=true"}, "metrics.prometheus.serviceAccount.name"},
		{[]string{"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheus.serviceAccount.name=p"}, "metrics.prometheus.serviceAccount.namespace"},
		{append([]string{"--set", "metrics.podMonitor.enabled=true"}, sa...), "metrics.prometheus.scrapeClass"},
	} {
		if _, err := renderErr(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("render %v: %v; want refused naming %s", c.args, err, c.want)
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

// verified: c verifies the server with the CA the manager publishes in
// its ConfigMap, as serverName, and does not skip verification.
func verified(c *monitoringv1.SafeTLSConfig, serverName string) bool {
	return c != nil && (c.InsecureSkipVerify == nil || !*c.InsecureSkipVerify) && ptrString(c.ServerName) == serverName &&
		c.CA.ConfigMap != nil && c.CA.ConfigMap.Name == metricsCAConfig && c.CA.ConfigMap.Key == "ca.crt" && c.CA.Secret == nil
}

func ptrString[T ~string](p *T) string {
	if p == nil {
		return ""
	}
	return string(*p)
}
