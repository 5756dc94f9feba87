package chart

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podValues sets every per-component pod value of both components.
const podValues = `
manager:
  podAnnotations: {example.com/manager: "m"}
  extraEnv:
    - {name: HTTPS_PROXY, value: "http://proxy:3128"}
    - name: POD_IP
      valueFrom: {fieldRef: {fieldPath: status.podIP}}
  resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 2Gi}}
  nodeSelector: {node-role.kubernetes.io/control-plane: ""}
  tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
daemon:
  podAnnotations: {example.com/daemon: "d"}
  extraEnv: [{name: GODEBUG, value: "netdns=go"}]
  resources: {requests: {cpu: 200m}, limits: {cpu: "1", memory: 256Mi}}
  nodeSelector: {example.com/estuary: "true"}
  tolerations: [{key: example.com/dedicated, operator: Equal, value: net, effect: NoExecute}]
`

// podObjects renders the chart and returns its manager Deployment, daemon
// DaemonSet and uninstall hook Job.
func podObjects(t *testing.T, args ...string) (*appsv1.Deployment, *appsv1.DaemonSet, *batchv1.Job) {
	t.Helper()
	objs := render(t, args...)
	var d appsv1.Deployment
	var ds appsv1.DaemonSet
	var j batchv1.Job
	convert(t, find(t, objs, "Deployment", "estuary-manager"), &d)
	convert(t, find(t, objs, "DaemonSet", "estuary-daemon"), &ds)
	convert(t, find(t, objs, "Job", "estuary-uninstall"), &j)
	return &d, &ds, &j
}

func checkEqual[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("%s: %+v, want %+v", what, got, want)
	}
}

// TestPodValuesLand: podAnnotations, extraEnv, resources, nodeSelector and
// tolerations of each component land in its pod template, the chart's own
// annotation and environment kept first; maps merge with the defaults as
// Helm merges values (kubernetes.io/os stays in nodeSelector, the default
// memory request in resources); the uninstall hook runs where the manager
// runs, with the manager's extra environment. The API server accepts the
// objects.
func TestPodValuesLand(t *testing.T) {
	d, ds, j := podObjects(t, "--values", valuesFile(t, []byte(podValues)))

	mp := d.Spec.Template
	if mp.Annotations["example.com/manager"] != "m" || mp.Annotations["checksum/bootstrap"] == "" || len(mp.Annotations) != 2 {
		t.Errorf("manager pod annotations %v; want checksum/bootstrap and example.com/manager", mp.Annotations)
	}
	managerEnv := []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"},
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}}
	checkEqual(t, "manager env", mp.Spec.Containers[0].Env, managerEnv)
	checkEqual(t, "manager resources", mp.Spec.Containers[0].Resources, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")}})
	managerNodes := map[string]string{"kubernetes.io/os": "linux", "node-role.kubernetes.io/control-plane": ""}
	managerTolerations := []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	checkEqual(t, "manager nodeSelector", mp.Spec.NodeSelector, managerNodes)
	checkEqual(t, "manager tolerations", mp.Spec.Tolerations, managerTolerations)

	dp := ds.Spec.Template
	checkEqual(t, "daemon pod annotations", dp.Annotations, map[string]string{"example.com/daemon": "d"})
	checkEqual(t, "daemon env", dp.Spec.Containers[0].Env, []corev1.EnvVar{
		{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "GODEBUG", Value: "netdns=go"}})
	checkEqual(t, "daemon resources", dp.Spec.Containers[0].Resources, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("256Mi")}})
	checkEqual(t, "daemon nodeSelector", dp.Spec.NodeSelector, map[string]string{"kubernetes.io/os": "linux", "example.com/estuary": "true"})
	checkEqual(t, "daemon tolerations", dp.Spec.Tolerations, []corev1.Toleration{
		{Key: "example.com/dedicated", Operator: corev1.TolerationOpEqual, Value: "net", Effect: corev1.TaintEffectNoExecute}})

	jp := j.Spec.Template
	checkEqual(t, "uninstall hook env", jp.Spec.Containers[0].Env, managerEnv)
	checkEqual(t, "uninstall hook nodeSelector", jp.Spec.NodeSelector, managerNodes)
	checkEqual(t, "uninstall hook tolerations", jp.Spec.Tolerations, managerTolerations)
	if len(jp.Annotations) != 0 {
		t.Errorf("uninstall hook pod annotations %v; want none (manager.podAnnotations are the manager's pods')", jp.Annotations)
	}

	ensureNamespace(t)
	for _, o := range []client.Object{d, ds, j} {
		if err := k8s.Create(ctx(t), o, client.DryRunAll); err != nil {
			t.Errorf("%T %s refused: %v", o, o.GetName(), err)
		}
	}
}

// TestPodValuesDefaults: unset, the new values add nothing to the pods
// (the manager's only annotation is checksum/bootstrap, the daemon's only
// variable NODE_NAME), and the daemon and the manager tolerate every taint.
func TestPodValuesDefaults(t *testing.T) {
	d, ds, j := podObjects(t)
	if a := d.Spec.Template.Annotations; len(a) != 1 || a["checksum/bootstrap"] == "" {
		t.Errorf("manager pod annotations %v; want checksum/bootstrap only", a)
	}
	if a := ds.Spec.Template.Annotations; len(a) != 0 {
		t.Errorf("daemon pod annotations %v; want none", a)
	}
	if e := d.Spec.Template.Spec.Containers[0].Env; len(e) != 0 {
		t.Errorf("manager env %+v; want none", e)
	}
	if e := j.Spec.Template.Spec.Containers[0].Env; len(e) != 0 {
		t.Errorf("uninstall hook env %+v; want none", e)
	}
	if e := ds.Spec.Template.Spec.Containers[0].Env; len(e) != 1 || e[0].Name != "NODE_NAME" {
		t.Errorf("daemon env %+v; want NODE_NAME only", e)
	}
	everyTaint := []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	checkEqual(t, "daemon tolerations", ds.Spec.Template.Spec.Tolerations, everyTaint)
	checkEqual(t, "manager tolerations", d.Spec.Template.Spec.Tolerations, everyTaint)
	d2, ds2, _ := podObjects(t, "--set-json", `manager.podAnnotations={}`, "--set-json", `daemon.extraEnv=[]`)
	checkEqual(t, "manager with podAnnotations {}", d2.Spec.Template, d.Spec.Template)
	checkEqual(t, "daemon with extraEnv []", ds2.Spec.Template, ds.Spec.Template)
}

// TestPodValuesRefused: a value of the wrong type, an unknown key, an
// extraEnv entry without a name, a variable or annotation the chart sets
// itself and a variable named twice fail the render, naming the value.
func TestPodValuesRefused(t *testing.T) {
	const schema = "values don't meet the specifications of the schema"
	for _, c := range []struct{ set, want string }{
		{"manager.podAnnotations.a=1", schema + ".*at '/manager/podAnnotations/a': got number, want string"},
		{"daemon.podAnnotations=x", schema + ".*at '/daemon/podAnnotations': got string, want object"},
		{"manager.extraEnv=x", schema + ".*at '/manager/extraEnv': got string, want array"},
		{"daemon.extraEnv[0].value=x", schema + ".*at '/daemon/extraEnv/0': missing property 'name'"},
		{"daemon.extraEnv[0].name=A,daemon.extraEnv[0].valu=x", schema + ".*at '/daemon/extraEnv/0': additional properties 'valu' not allowed"},
		{"manager.extraEnv[0].name=A,manager.extraEnv[0].valueFrom.fieldref.fieldPath=x", schema + ".*at '/manager/extraEnv/0/valueFrom': additional properties 'fieldref' not allowed"},
		{"daemon.resources.request.cpu=1", schema + ".*at '/daemon/resources': additional properties 'request' not allowed"},
		{"daemon.nodeSelector.a=1", schema + ".*at '/daemon/nodeSelector/a': got number, want string"},
		{"daemon.tolerations[0].operator=Exist", schema + ".*at '/daemon/tolerations/0/operator'"},
		{"daemon.podAnnotation.a=b", schema + ".*at '/daemon': additional properties 'podAnnotation' not allowed"},
		{"daemon.extraEnv[0].name=NODE_NAME", "daemon.extraEnv[0]: NODE_NAME is set by the chart itself"},
		{"manager.extraEnv[0].name=A,manager.extraEnv[1].name=A", "manager.extraEnv[1]: A is given twice"},
		{"manager.podAnnotations.checksum/bootstrap=x", "manager.podAnnotations: checksum/bootstrap is set by the chart itself"},
	} {
		_, err := renderErr(t, "--set", c.set)
		if err == nil || !matches(err.Error(), c.want) {
			t.Errorf("--set %s: %v; want it refused with %q", c.set, err, c.want)
		}
	}
}

// matches reports whether s contains the parts of want split at ".*", in order.
func matches(s, want string) bool {
	for _, part := range strings.Split(want, ".*") {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return true
}
