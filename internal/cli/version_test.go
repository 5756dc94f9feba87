package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/estuary-cni/estuary/internal/version"
)

// runSplit runs `kubectl estuary args...` and returns stdout and stderr apart.
func runSplit(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	root := NewRoot(Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}, func() (*rest.Config, error) { return cfg, nil })
	root.SetArgs(args)
	err = root.ExecuteContext(bg())
	return out.String(), errOut.String(), err
}

// estuaryWorkload creates the manager Deployment or the daemon DaemonSet as
// the chart labels them, at chart version v.
func estuaryWorkload(t *testing.T, ns, name, v string, daemonSet bool) {
	t.Helper()
	labels := map[string]string{partOfLabel: "estuary", nameLabel: name, versionLabel: v}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{nameLabel: name}}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{nameLabel: name}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/" + name + ":" + v}}},
	}
	meta := metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
	if daemonSet {
		create(t, &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl}})
		return
	}
	create(t, &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Selector: sel, Template: tmpl}})
}

func TestVersion(t *testing.T) {
	old := version.Version
	version.Version = "0.2.1"
	t.Cleanup(func() { version.Version = old })

	ns := namespace(t)
	out, errOut, err := runSplit(t, "version", "-n", ns)
	if err != nil || !strings.Contains(out, "Server:  not found") || !strings.Contains(errOut, "warning: no estuary") {
		t.Errorf("no install: %q, %q, %v", out, errOut, err)
	}

	estuaryWorkload(t, ns, "estuary-manager", "0.2.0", false)
	estuaryWorkload(t, ns, "estuary-daemon", "0.2.0", true)
	out, errOut, err = runSplit(t, "version", "-n", ns)
	if err != nil || errOut != "" {
		t.Fatalf("same minor version: %v, stderr %q", err, errOut)
	}
	requireIn(t, out, "Client:  kubectl-estuary 0.2.1 (commit ",
		"Server:  DaemonSet "+ns+"/estuary-daemon 0.2.0", "registry.example/estuary-daemon:0.2.0",
		"Server:  Deployment "+ns+"/estuary-manager 0.2.0")

	version.Version = "0.3.0"
	out, errOut, err = runSplit(t, "version", "-n", ns, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r VersionReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("-o json %q: %v", out, err)
	}
	if r.Client.Version != "0.3.0" || len(r.Server) != 2 || r.Server[1].Version != "0.2.0" ||
		r.Server[1].Images[0] != "registry.example/estuary-manager:0.2.0" || len(r.Warnings) != 2 {
		t.Errorf("-o json: %+v", r)
	}
	if strings.Count(errOut, "warning: kubectl-estuary 0.3.0 and ") != 2 {
		t.Errorf("skew: stderr %q, want a warning per component", errOut)
	}

	out, _, err = runSplit(t, "version", "--client")
	if err != nil || strings.Contains(out, "Server") || !strings.Contains(out, "kubectl-estuary 0.3.0") {
		t.Errorf("--client: %q, %v", out, err)
	}
	out, _, err = runSplit(t, "version", "--client", "-o", "yaml")
	if err != nil || !strings.Contains(out, "version: 0.3.0") {
		t.Errorf("-o yaml: %q, %v", out, err)
	}
	if _, _, err := runSplit(t, "version", "-o", "xml"); err == nil {
		t.Error("-o xml accepted")
	}
}

func TestSkewWarnings(t *testing.T) {
	mixed := []Component{{Kind: "DaemonSet", Name: "d", Version: "0.2.0"}, {Kind: "Deployment", Name: "m", Version: "0.3.0"}}
	w := skewWarnings("0.3.1", mixed)
	if len(w) != 2 || !strings.Contains(w[1], "upgrade in progress") {
		t.Errorf("warnings %q: want the daemon's skew and the mixed versions", w)
	}
}
