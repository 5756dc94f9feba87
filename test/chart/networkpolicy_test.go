package chart

import (
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// netpolName names every object networkPolicy.enabled renders.
	netpolName      = "kube-network-policies"
	netpolComponent = "network-policy"
)

// netpolObjects are the rendered objects of the network-policy component.
func netpolObjects(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetLabels()["app.kubernetes.io/component"] == netpolComponent || o.GetName() == netpolName {
			out = append(out, o)
		}
	}
	return out
}

// TestNetworkPolicyOffByDefault: no value set renders kube-network-policies.
func TestNetworkPolicyOffByDefault(t *testing.T) {
	for name, objs := range renders(t) {
		for _, o := range netpolObjects(objs) {
			t.Errorf("%s: rendered %s %s without networkPolicy.enabled", name, o.GetKind(), o.GetName())
		}
	}
}

// TestNetworkPolicyRenders: networkPolicy.enabled renders the DaemonSet,
// its ServiceAccount and a ClusterRole and binding, and the API server
// accepts each (dry run, strict field validation).
func TestNetworkPolicyRenders(t *testing.T) {
	ensureNamespace(t)
	objs := netpolObjects(render(t, "--set", "networkPolicy.enabled=true"))
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.GetKind()]++
		if o.GetName() != netpolName {
			t.Errorf("%s %s: want the name %s", o.GetKind(), o.GetName(), netpolName)
		}
		if err := k8s.Create(ctx(t), o.DeepCopy(), client.DryRunAll); err != nil {
			t.Errorf("%s %s refused: %v", o.GetKind(), o.GetName(), err)
		}
	}
	want := map[string]int{"DaemonSet": 1, "ServiceAccount": 1, "ClusterRole": 1, "ClusterRoleBinding": 1}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("rendered kinds %v, want %v", kinds, want)
	}
	checkNetpolRole(t, find(t, objs, "ClusterRole", netpolName))
	var ds appsv1.DaemonSet
	convert(t, find(t, objs, "DaemonSet", netpolName), &ds)
	checkNetpolDaemonSet(t, &ds, "registry.k8s.io/networking/kube-network-policies:v0.8.0", "--nfqueue-id=98")
}

// TestNetworkPolicyValues: the image and the queue follow the values.
func TestNetworkPolicyValues(t *testing.T) {
	objs := render(t, "--set", "networkPolicy.enabled=true", "--set", "networkPolicy.image.repository=example.local/netpol",
		"--set", "networkPolicy.image.tag=v9", "--set", "networkPolicy.nfqueueID=100", "--set", "networkPolicy.extraArgs[0]=--fail-open")
	var ds appsv1.DaemonSet
	convert(t, find(t, objs, "DaemonSet", netpolName), &ds)
	c := checkNetpolDaemonSet(t, &ds, "example.local/netpol:v9", "--nfqueue-id=100")
	if !slices.Contains(c.Args, "--fail-open") {
		t.Errorf("args %v lack the extra --fail-open", c.Args)
	}
}

// checkNetpolRole requires exactly install.yaml's rules: list and watch
// of pods, namespaces and NetworkPolicies.
func checkNetpolRole(t *testing.T, o *unstructured.Unstructured) {
	t.Helper()
	var r rbacv1.ClusterRole
	convert(t, o, &r)
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "namespaces"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"list", "watch"}},
	}
	if fmt.Sprint(r.Rules) != fmt.Sprint(want) {
		t.Errorf("ClusterRole %s rules %+v, want %+v", r.Name, r.Rules, want)
	}
}

// checkNetpolDaemonSet checks what kube-network-policies needs on a node
// and returns its container.
func checkNetpolDaemonSet(t *testing.T, ds *appsv1.DaemonSet, image, queueArg string) *corev1.Container {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if ds.Namespace != namespace || !spec.HostNetwork || spec.ServiceAccountName != netpolName ||
		spec.PriorityClassName != "system-node-critical" {
		t.Errorf("DaemonSet %s: namespace %q hostNetwork %v serviceAccount %q priority %q", ds.Name, ds.Namespace,
			spec.HostNetwork, spec.ServiceAccountName, spec.PriorityClassName)
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("DaemonSet %s: containers %+v, want one", ds.Name, spec.Containers)
	}
	c := &spec.Containers[0]
	if c.Image != image || !slices.Equal(c.Command, []string{"/bin/netpol"}) {
		t.Errorf("DaemonSet %s: image %s command %v, want %s, [/bin/netpol]", ds.Name, c.Image, c.Command, image)
	}
	for _, a := range []string{"--hostname-override=$(NODE_NAME)", queueArg, "--metrics-bind-address=127.0.0.1:9080"} {
		if !slices.Contains(c.Args, a) {
			t.Errorf("DaemonSet %s: args %v lack %s", ds.Name, c.Args, a)
		}
	}
	if len(c.Env) != 1 || c.Env[0].Name != "NODE_NAME" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef == nil ||
		c.Env[0].ValueFrom.FieldRef.FieldPath != "spec.nodeName" {
		t.Errorf("DaemonSet %s: env %+v, want NODE_NAME from spec.nodeName", ds.Name, c.Env)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("DaemonSet %s: not privileged (it programs nftables and reads nfnetlink_queue)", ds.Name)
	}
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	if m, ok := mounts["/var/run/netns"]; !ok || m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer {
		t.Errorf("DaemonSet %s: /var/run/netns mount %+v, want HostToContainer", ds.Name, m)
	}
	if _, ok := mounts["/var/run/nri"]; !ok {
		t.Errorf("DaemonSet %s: the NRI socket's directory /var/run/nri is not mounted", ds.Name)
	}
	return c
}

// TestNetworkPolicyGrants installs the rendered RBAC and asks the API
// server's authorizer what kube-network-policies' service account may do:
// read pods, namespaces and NetworkPolicies, and nothing else.
func TestNetworkPolicyGrants(t *testing.T) {
	ensureNamespace(t)
	installRBAC(t, netpolObjects(render(t, "--set", "networkPolicy.enabled=true")))
	user := fmt.Sprintf("system:serviceaccount:%s:%s", namespace, netpolName)
	for _, a := range []access{
		{"list", "", "pods", "", ""}, {"watch", "", "pods", "", ""},
		{"list", "", "namespaces", "", ""}, {"watch", "", "namespaces", "", ""},
		{"list", "networking.k8s.io", "networkpolicies", "", ""}, {"watch", "networking.k8s.io", "networkpolicies", "", ""},
	} {
		if !allowed(t, user, a) {
			t.Errorf("%s may not %s; the chart must grant it", netpolName, a)
		}
	}
	for _, a := range []access{
		{"get", "", "secrets", "", namespace}, {"list", "", "secrets", "", ""}, {"create", "", "pods", "", "default"},
		{"patch", "", "pods", "", "default"}, {"list", "", "nodes", "", ""}, {"update", "", "namespaces", "", ""},
		{"create", "networking.k8s.io", "networkpolicies", "", "default"}, {"delete", "networking.k8s.io", "networkpolicies", "", "default"},
		{"list", estuaryGroup, "ipinstances", "", ""}, {"create", "", "events", "", "default"},
	} {
		if allowed(t, user, a) {
			t.Errorf("%s may %s; the chart must not grant it", netpolName, a)
		}
	}
}
