package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/estuary-cni/estuary/internal/ipamcheck"
)

// daemonPod creates a running daemon pod, as the chart makes it, on node.
func daemonPod(t *testing.T, ns, node string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "estuary-daemon-" + node,
		Labels: map[string]string{"app.kubernetes.io/name": "estuary-daemon"}},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: true, Containers: []corev1.Container{{
			Name: "daemon", Image: "estuary-daemon", Command: []string{"/estuary-daemon"},
			Args: []string{"--node-name=$(NODE_NAME)", "--health-probe-bind-address=127.0.0.1:9082"}}}}}
	create(t, p)
	p.Status.Phase = corev1.PodRunning
	if err := k8s.Status().Update(bg(), p); err != nil {
		t.Fatal(err)
	}
	return p
}

// nodeFindings decodes a check -o json report and returns it with its
// node findings.
func nodeFindings(t *testing.T, out string) (ipamcheck.Report, []ipamcheck.Finding) {
	t.Helper()
	var r ipamcheck.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("check -o json: %v\n%s", err, out)
	}
	var nodes []ipamcheck.Finding
	for _, f := range r.Findings {
		if ipamcheck.IsNodeKind(f.Kind) {
			nodes = append(nodes, f)
		}
	}
	return r, nodes
}

// check execs `estuary-daemon endpoints` in each node's daemon pod; the
// test API server has no kubelet, so the exec fails and the node is
// reported unreadable (exit 3), which repair leaves alone. --skip-nodes
// reads no daemon.
func TestCheckReportsUnreadableNodeUnlessSkipped(t *testing.T) {
	ns := namespace(t)
	daemonPod(t, ns, "cli-exec-node")

	out, err := run(t, "", "check", "-o", "json", "--grace", "0s", "--interval", "100ms", "--daemon-namespace", ns)
	if ExitCode(err) != 3 {
		t.Fatalf("check with an unreadable daemon: exit %d (%v), want 3\n%s", ExitCode(err), err, out)
	}
	_, nodes := nodeFindings(t, out)
	if len(nodes) != 1 || nodes[0].Kind != ipamcheck.NodeUnreadable || nodes[0].Node != "cli-exec-node" {
		t.Fatalf("node findings: %+v, want one NodeUnreadable of cli-exec-node", nodes)
	}
	want := `node cli-exec-node: daemon endpoints unreadable: exec "/estuary-daemon endpoints --health-address 127.0.0.1:9082" in pod ` +
		ns + "/estuary-daemon-cli-exec-node (container daemon): "
	t.Logf("finding: %s", nodes[0].Detail)
	if !strings.HasPrefix(nodes[0].Detail, want) {
		t.Errorf("detail %q\n does not start with %q", nodes[0].Detail, want)
	}

	report := filepath.Join(t.TempDir(), "report.json")
	if err := os.WriteFile(report, []byte(out+"kubectl estuary: check: 1 problems found\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	repaired, err := run(t, "", "repair", "--from-report", report, "--yes")
	if err != nil {
		t.Fatalf("repair: %v\n%s", err, repaired)
	}
	requireIn(t, repaired, "left alone: NodeUnreadable: node cli-exec-node", "a node finding: repair releases nothing for it", "nothing to release")

	out, err = run(t, "", "check", "-o", "json", "--grace", "0s", "--interval", "100ms", "--daemon-namespace", ns, "--skip-nodes")
	r, nodes := nodeFindings(t, out)
	if len(nodes) != 0 || r.Nodes != 0 {
		t.Errorf("check --skip-nodes read nodes: %d nodes, findings %+v", r.Nodes, nodes)
	}
	if ExitCode(err) != 0 {
		t.Errorf("check --skip-nodes of a clean cluster: exit %d (%v)\n%s", ExitCode(err), err, out)
	}
}

// A node running pods of the pod network without a daemon pod of the
// selector is reported; a node running only host-network pods is not.
func TestCheckReportsNodeWithoutDaemon(t *testing.T) {
	ns := namespace(t)
	runningPod(t, ns, "orphan", nil)
	out, err := run(t, "", "check", "-o", "json", "--grace", "0s", "--interval", "100ms", "--daemon-namespace", ns)
	if ExitCode(err) != 3 {
		t.Fatalf("check of a node without daemon: exit %d (%v), want 3\n%s", ExitCode(err), err, out)
	}
	_, nodes := nodeFindings(t, out)
	if len(nodes) != 1 || nodes[0].Node != "n1" || !strings.Contains(nodes[0].Detail, "no daemon pod runs on the node (namespace "+ns) ||
		!strings.Contains(nodes[0].Detail, "1 pods of the pod network") {
		t.Fatalf("node findings: %+v, want n1 without daemon", nodes)
	}
}

// The daemon's health address is found in any of the flag's spellings, and
// the container's own binary runs the subcommand.
func TestEndpointsArgv(t *testing.T) {
	for _, c := range []struct {
		ctr  corev1.Container
		want string
	}{
		{corev1.Container{Command: []string{"/estuary-daemon"}, Args: []string{"--health-probe-bind-address=0.0.0.0:8090"}},
			"/estuary-daemon endpoints --health-address 0.0.0.0:8090"},
		{corev1.Container{Command: []string{"/bin/daemon", "-health-probe-bind-address", ":9"}}, "/bin/daemon endpoints --health-address :9"},
		{corev1.Container{Args: []string{"--node-name=n1"}}, "/estuary-daemon endpoints"},
	} {
		if got := strings.Join(endpointsArgv(&c.ctr), " "); got != c.want {
			t.Errorf("endpointsArgv(%v %v) = %q, want %q", c.ctr.Command, c.ctr.Args, got, c.want)
		}
	}
}
