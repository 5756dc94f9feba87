package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

var labDNS = CoreDNSOptions{Namespace: "kube-system", Image: "lab/coredns:x", ClusterIP: "10.79.0.10", Domain: "cluster.local"}

// decodeList splits a rendered List into its items and decodes each into the
// typed object of its kind, refusing any field the API type does not have.
func decodeList(t *testing.T, b []byte, into ...any) {
	t.Helper()
	var list struct {
		APIVersion, Kind string
		Items            []json.RawMessage
	}
	if err := json.Unmarshal(b, &list); err != nil {
		t.Fatal(err)
	}
	if list.APIVersion != "v1" || list.Kind != "List" || len(list.Items) != len(into) {
		t.Fatalf("want a v1 List of %d items, got %s %s with %d", len(into), list.APIVersion, list.Kind, len(list.Items))
	}
	for i, raw := range list.Items {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into[i]); err != nil {
			t.Fatalf("item %d as %T: %v\n%s", i, into[i], err, raw)
		}
	}
}

type dnsObjects struct {
	sa      corev1.ServiceAccount
	role    rbacv1.ClusterRole
	binding rbacv1.ClusterRoleBinding
	cm      corev1.ConfigMap
	deploy  appsv1.Deployment
	svc     corev1.Service
}

func renderDNS(t *testing.T) *dnsObjects {
	t.Helper()
	b, err := CoreDNS(labDNS)
	if err != nil {
		t.Fatal(err)
	}
	var o dnsObjects
	decodeList(t, b, &o.sa, &o.role, &o.binding, &o.cm, &o.deploy, &o.svc)
	return &o
}

func TestCoreDNSKindsAndNames(t *testing.T) {
	o := renderDNS(t)
	for _, got := range []struct{ kind, name, ns, wantKind, wantName, wantNS string }{
		{o.sa.Kind, o.sa.Name, o.sa.Namespace, "ServiceAccount", "coredns", "kube-system"},
		{o.role.Kind, o.role.Name, o.role.Namespace, "ClusterRole", "system:coredns", ""},
		{o.binding.Kind, o.binding.Name, o.binding.Namespace, "ClusterRoleBinding", "system:coredns", ""},
		{o.cm.Kind, o.cm.Name, o.cm.Namespace, "ConfigMap", "coredns", "kube-system"},
		{o.deploy.Kind, o.deploy.Name, o.deploy.Namespace, "Deployment", "coredns", "kube-system"},
		{o.svc.Kind, o.svc.Name, o.svc.Namespace, "Service", "kube-dns", "kube-system"},
	} {
		if got.kind != got.wantKind || got.name != got.wantName || got.ns != got.wantNS {
			t.Errorf("object %s %s/%s, want %s %s/%s", got.kind, got.ns, got.name, got.wantKind, got.wantNS, got.wantName)
		}
	}
	s := o.binding.Subjects
	if o.binding.RoleRef.Name != "system:coredns" || len(s) != 1 || s[0].Name != "coredns" || s[0].Namespace != "kube-system" {
		t.Errorf("binding %+v to %+v, want system:coredns to kube-system/coredns", o.binding.RoleRef, s)
	}
}

func TestCoreDNSRoleIsLeastPrivilege(t *testing.T) {
	want := map[string][]string{
		"/endpoints": {"list", "watch"}, "/services": {"list", "watch"}, "/pods": {"list", "watch"},
		"/namespaces": {"list", "watch"}, "discovery.k8s.io/endpointslices": {"list", "watch"},
	}
	got := map[string][]string{}
	for _, r := range renderDNS(t).role.Rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v: want no resource names or URLs", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				got[g+"/"+res] = append(got[g+"/"+res], r.Verbs...)
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("role grants %v, want %v", got, want)
	}
	for k, verbs := range want {
		if !slices.Equal(got[k], verbs) {
			t.Errorf("role grants %s %v, want %v", k, got[k], verbs)
		}
	}
}

func TestCoreDNSDeployment(t *testing.T) {
	d := renderDNS(t).deploy
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 || d.Spec.Template.Labels["k8s-app"] != "kube-dns" ||
		d.Spec.Selector.MatchLabels["k8s-app"] != "kube-dns" {
		t.Errorf("deployment spec: replicas %v, labels %v, selector %v", d.Spec.Replicas, d.Spec.Template.Labels, d.Spec.Selector)
	}
	p := d.Spec.Template.Spec
	if len(p.Containers) != 1 || p.ServiceAccountName != "coredns" || p.DNSPolicy != corev1.DNSDefault {
		t.Fatalf("pod spec: %+v", p)
	}
	c := p.Containers[0]
	if c.Image != "lab/coredns:x" || c.ImagePullPolicy != corev1.PullNever || !slices.Equal(c.Args, []string{"-conf", "/etc/coredns/Corefile"}) {
		t.Errorf("container image %s, pull %s, args %v", c.Image, c.ImagePullPolicy, c.Args)
	}
	ports := map[string]int32{}
	for _, cp := range c.Ports {
		ports[cp.Name] = cp.ContainerPort
	}
	if r := c.ReadinessProbe; r == nil || r.HTTPGet == nil || r.HTTPGet.Path != "/ready" || ports[r.HTTPGet.Port.StrVal] != 8181 {
		t.Errorf("readiness probe %+v (ports %v), want GET /ready on 8181", r, ports)
	}
	if l := c.LivenessProbe; l == nil || l.HTTPGet == nil || l.HTTPGet.Path != "/health" || ports[l.HTTPGet.Port.StrVal] != 8080 {
		t.Errorf("liveness probe %+v (ports %v), want GET /health on 8080", l, ports)
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want memory requests and limits", c.Resources)
	}
}

func TestCoreDNSTolerations(t *testing.T) {
	tol := renderDNS(t).deploy.Spec.Template.Spec.Tolerations
	for _, taint := range []corev1.Taint{
		{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule},
	} {
		if !slices.ContainsFunc(tol, func(x corev1.Toleration) bool {
			return x.Key == taint.Key && x.Operator == corev1.TolerationOpExists && (x.Effect == "" || x.Effect == taint.Effect)
		}) {
			t.Errorf("tolerations %+v do not tolerate %s:%s", tol, taint.Key, taint.Effect)
		}
	}
}

func TestCoreDNSService(t *testing.T) {
	s := renderDNS(t).svc
	if s.Spec.ClusterIP != "10.79.0.10" || s.Spec.Selector["k8s-app"] != "kube-dns" {
		t.Errorf("service clusterIP %s, selector %v", s.Spec.ClusterIP, s.Spec.Selector)
	}
	var got []string
	for _, p := range s.Spec.Ports {
		got = append(got, fmt.Sprintf("%s %d->%s", p.Protocol, p.Port, p.TargetPort.String()))
	}
	want := []string{"UDP 53->53", "TCP 53->53", "TCP 9153->9153"}
	if !slices.Equal(got, want) {
		t.Errorf("service ports %v, want %v", got, want)
	}
}

func TestCoreDNSServiceDualStack(t *testing.T) {
	b, err := CoreDNS(CoreDNSOptions{Namespace: "kube-system", Image: "i", ClusterIP: "10.79.0.10", SecondIP: "fd79::10", Domain: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"clusterIPs":["10.79.0.10","fd79::10"]`, `"ipFamilyPolicy":"PreferDualStack"`} {
		if !strings.Contains(strings.ReplaceAll(strings.ReplaceAll(string(b), " ", ""), "\n", ""), want) {
			t.Errorf("dual-stack kube-dns lacks %s:\n%s", want, b)
		}
	}
}

func TestCorefile(t *testing.T) {
	o := renderDNS(t)
	cf := o.cm.Data["Corefile"]
	if cf != Corefile("cluster.local") {
		t.Errorf("ConfigMap Corefile differs from Corefile(cluster.local):\n%s", cf)
	}
	for _, want := range []string{
		".:53 {", "errors", "health :8080", "ready :8181",
		"kubernetes cluster.local in-addr.arpa ip6.arpa {", "pods insecure",
		"fallthrough in-addr.arpa ip6.arpa", "ttl 30", "loop", "cache 30", "reload", "loadbalance",
	} {
		if !strings.Contains(cf, want) {
			t.Errorf("Corefile lacks %q:\n%s", want, cf)
		}
	}
	if strings.Contains(cf, "forward") {
		t.Errorf("Corefile forwards, but the lab has no upstream DNS:\n%s", cf)
	}
}

func TestCoreDNSRequiresOptions(t *testing.T) {
	for _, o := range []CoreDNSOptions{{}, {Namespace: "kube-system", Image: "i", Domain: "cluster.local"}} {
		if _, err := CoreDNS(o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}
