package chart

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/estuary-cni/estuary/internal/webhook"
)

// flagValue is the value of --name=... in args, and whether it is there.
func flagValue(args []string, name string) (string, bool) {
	i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "--"+name+"=") })
	if i < 0 {
		return "", false
	}
	return strings.TrimPrefix(args[i], "--"+name+"="), true
}

// manager.podSelector narrows the pod webhooks exactly as
// internal/webhook.Configurations does for the same selector, and reaches
// the manager as a --pod-label-selector that selects the same pods; unset,
// no flag is passed and the pod webhooks skip only opted-out pods.
func TestPodSelectorValue(t *testing.T) {
	sel := &metav1.LabelSelector{
		MatchLabels: map[string]string{"cni": "estuary", "team": "a"},
		MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"legacy", "old"}},
			{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"z1"}},
			{Key: "managed", Operator: metav1.LabelSelectorOpExists},
			{Key: "skip", Operator: metav1.LabelSelectorOpDoesNotExist},
		},
	}
	objs := render(t, "--set-json", `manager.podSelector={"matchLabels":{"cni":"estuary","team":"a"},"matchExpressions":[`+
		`{"key":"tier","operator":"NotIn","values":["legacy","old"]},{"key":"zone","operator":"In","values":["z1"]},`+
		`{"key":"managed","operator":"Exists"},{"key":"skip","operator":"DoesNotExist"}]}`)
	wantV, wantM := wantConfigurations(webhook.Service{PodFailurePolicy: admissionregistrationv1.Ignore, TimeoutSeconds: 10, PodTimeoutSeconds: 5, PodSelector: sel})
	var v admissionregistrationv1.ValidatingWebhookConfiguration
	var m admissionregistrationv1.MutatingWebhookConfiguration
	convert(t, find(t, objs, "ValidatingWebhookConfiguration", webhook.ConfigurationName), &v)
	convert(t, find(t, objs, "MutatingWebhookConfiguration", webhook.ConfigurationName), &m)
	if !equality.Semantic.DeepEqual(v.Webhooks, wantV.Webhooks) || !equality.Semantic.DeepEqual(m.Webhooks, wantM.Webhooks) {
		t.Errorf("webhooks\n%+v\n%+v\nwant (internal/webhook.Configurations)\n%+v\n%+v", v.Webhooks, m.Webhooks, wantV.Webhooks, wantM.Webhooks)
	}
	var d appsv1.Deployment
	convert(t, find(t, objs, "Deployment", "estuary-manager"), &d)
	text, ok := flagValue(d.Spec.Template.Spec.Containers[0].Args, "pod-label-selector")
	if !ok {
		t.Fatalf("manager args %v lack --pod-label-selector", d.Spec.Template.Spec.Containers[0].Args)
	}
	got, err := labels.Parse(text)
	if err != nil {
		t.Fatalf("--pod-label-selector=%q does not parse: %v", text, err)
	}
	want, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("--pod-label-selector=%q selects %q, want %q", text, got, want)
	}
	convert(t, find(t, render(t), "Deployment", "estuary-manager"), &d)
	if a, ok := flagValue(d.Spec.Template.Spec.Containers[0].Args, "pod-label-selector"); ok {
		t.Errorf("default values pass --pod-label-selector=%s", a)
	}
	if _, err := renderErr(t, "--set-json", `manager.podSelector={"matchExpressions":[{"key":"a","operator":"Gt","values":["1"]}]}`); err == nil ||
		!strings.Contains(err.Error(), "podSelector") {
		t.Errorf("operator Gt rendered (%v); want an error naming podSelector", err)
	}
}

// The API client rate limits reach the manager's and the daemon's flags:
// controller-runtime's defaults unless set.
func TestKubeClientValues(t *testing.T) {
	for _, c := range []struct {
		args            []string
		manager, daemon [2]string
	}{
		{nil, [2]string{"100", "200"}, [2]string{"20", "30"}},
		{[]string{"--set", "manager.kubeClientQPS=300,manager.kubeClientBurst=600,daemon.kubeClientBurst=15", "--set-json", "daemon.kubeClientQPS=7.5"},
			[2]string{"300", "600"}, [2]string{"7.5", "15"}},
	} {
		objs := render(t, c.args...)
		var d appsv1.Deployment
		var ds appsv1.DaemonSet
		convert(t, find(t, objs, "Deployment", "estuary-manager"), &d)
		convert(t, find(t, objs, "DaemonSet", "estuary-daemon"), &ds)
		for what, pair := range map[string]struct {
			args []string
			want [2]string
		}{"manager": {d.Spec.Template.Spec.Containers[0].Args, c.manager}, "daemon": {ds.Spec.Template.Spec.Containers[0].Args, c.daemon}} {
			qps, _ := flagValue(pair.args, "kube-client-qps")
			burst, _ := flagValue(pair.args, "kube-client-burst")
			if qps != pair.want[0] || burst != pair.want[1] {
				t.Errorf("%v: %s --kube-client-qps=%q --kube-client-burst=%q, want %s and %s", c.args, what, qps, burst, pair.want[0], pair.want[1])
			}
		}
	}
	if _, err := renderErr(t, "--set", "manager.kubeClientQPS=0"); err == nil || !strings.Contains(err.Error(), "kubeClientQPS") {
		t.Errorf("manager.kubeClientQPS=0 rendered (%v); want an error naming it", err)
	}
}
