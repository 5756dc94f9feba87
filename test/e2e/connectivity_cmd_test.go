//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// connTestNamespace is the namespace the test gives the command.
const connTestNamespace = "e2e-connectivity-cmd"

// TestConnectivityTestCommand: `kubectl estuary connectivity-test` on the
// lab, with the untagged underlay network rack1 on node-1 and node-2 and
// the external host serving TCP, prints an OK line for every path (pod to
// pod on one node and across nodes both ways, the Service, node to pod,
// the external host, overlay to underlay both ways, the StatefulSet
// address kept from node-2 to node-1, and NetworkPolicy: the client denied
// by a default-deny ingress policy on node-2's target, then admitted by an
// allow policy while the same-node probe stays denied), none FAIL or SKIP,
// exits 0, and its namespace is gone when it returns; then `kubectl
// estuary policy drops` lists node-2's drop of a denied probe.
func TestConnectivityTestCommand(t *testing.T) {
	e := needLab(t)
	e.labelNodes(t, rackLabel, rackValue, underlayNodes...)
	e.createUnderlay(t)
	e.waitUnderlayReady(t)
	external := fmt.Sprintf("%s:%d", e.externalAddr, externalPort)
	serveClientIP(t, e.externalNetns, external)
	plugin := e.plugin(t)
	t.Cleanup(func() { e.deleteNamespace(t, connTestNamespace) }) // only if the command left it

	out, err := e.connectivityTest(t, plugin, "--external-target", external)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !slices.Contains([]string{"OK", "FAIL", "SKIP"}, f[0]) {
			continue
		}
		if f[0] != "OK" {
			t.Errorf("not OK: %s", line)
		}
		seen[f[1]]++
	}
	want := map[string]int{
		"pod-to-pod/same-node": 2, "pod-to-pod/across-nodes": 2, "pod-to-service": 1,
		"node-to-pod/across-nodes": 1, "node-to-pod/same-node": 1, "pod-to-external": 1,
		"overlay-to-underlay": 1, "underlay-to-overlay": 1, "retained-address": 1,
		"policy/deny-ingress": 2, "policy/allow-ingress": 1,
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Errorf("path lines %v\nwant %v", seen, want)
	}
	for _, w := range []string{"14 paths: 14 OK, 0 failed, 0 skipped",
		"policy/deny-ingress       client (node-1, ", "policy/deny-ingress       same-node (node-1, ",
		"-> policy-target (node-2, ", ": denied: curl: (28) ", "policy/allow-ingress      client (node-1, ",
		"retained-address          client (node-1, ", "-> retain-0 (node-2 -> node-1, ",
		"overlay-to-underlay       client (node-1, ", "-> underlay-1 (node-2, 10.77.100."} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q", w)
		}
	}
	e.requireTargetDrop(t, plugin)
}

// requireTargetDrop: `kubectl estuary policy drops` lists, from node-2's
// daemon, a TCP packet to the policy target's port 8080 that its isolation
// dropped on ingress (the denied probes of the policy paths).
func (e *labEnv) requireTargetDrop(t *testing.T, plugin string) {
	t.Helper()
	cmd := exec.Command(plugin, "policy", "drops", "--since", "10m", "--node", "node-2", "-o", "json")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl estuary policy drops: %v\n%s", err, out)
	}
	var r struct {
		Drops []struct {
			Node, Direction, Pod, Policy, Protocol string
			DstPort                                int
		}
		Nodes []struct{ Node, Error string }
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("policy drops -o json: %v\n%s", err, out)
	}
	for _, d := range r.Drops {
		if d.Node == "node-2" && d.Direction == "ingress" && d.Policy == "" && d.Protocol == "tcp" && d.DstPort == 8080 &&
			(d.Pod == "" || d.Pod == connTestNamespace+"/policy-target") {
			t.Logf("policy drops lists %+v", d)
			return
		}
	}
	t.Errorf("policy drops lists no isolation drop of TCP to port 8080 on node-2:\n%s", out)
}

// TestConnectivityTestCommandFailsAPath: with an external target where
// nothing listens, the command prints a FAIL line for pod-to-external with
// curl's reason, still checks the other paths, exits 3, and deletes its
// namespace.
func TestConnectivityTestCommandFailsAPath(t *testing.T) {
	e := needLab(t)
	plugin := e.plugin(t)
	t.Cleanup(func() { e.deleteNamespace(t, connTestNamespace) }) // only if the command left it
	closed := fmt.Sprintf("%s:%d", e.externalAddr, externalPort+1)
	out, err := e.connectivityTest(t, plugin, "--external-target", closed, "--path-timeout", "5s", "--probe-timeout", "2s")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("exit: %v, want status 3", err)
	}
	prefix := "FAIL  pod-to-external           client (node-1, "
	reason := fmt.Sprintf(" -> %s: probe failed: tcp http://%s/: curl: (7) Failed to connect", closed, closed)
	var fails []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "FAIL") {
			fails = append(fails, line)
		}
	}
	if len(fails) != 1 || !strings.HasPrefix(fails[0], prefix) || !strings.Contains(fails[0], reason) {
		t.Errorf("FAIL lines %q, want one starting %q and saying %q", fails, prefix, reason)
	}
	if !strings.Contains(out, "1 failed") || !strings.Contains(out, " OK, ") {
		t.Errorf("summary: %s", out)
	}
}

// connectivityTest runs the plugin's connectivity-test in
// connTestNamespace with args, logs what it printed, and checks the
// namespace is gone when it returns.
func (e *labEnv) connectivityTest(t *testing.T, plugin string, args ...string) (string, error) {
	t.Helper()
	args = append([]string{"connectivity-test", "--test-namespace", connTestNamespace}, args...)
	start := time.Now()
	cmd := exec.Command(plugin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.kubeconfig)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("kubectl estuary %s (%.1fs, %v):\nstderr:\n%s\nstdout:\n%s", strings.Join(args, " "), time.Since(start).Seconds(), err,
		stderr.String(), stdout.String())
	var ns corev1.Namespace
	if err := e.c.Get(testCtx(t, time.Minute), client.ObjectKey{Name: connTestNamespace}, &ns); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after the command: %v (phase %s), want gone", connTestNamespace, err, ns.Status.Phase)
	}
	return stdout.String(), err
}

// waitUnderlayReady waits until the manager has counted rack1's free
// addresses (what the command plans from) and labelled its nodes
// available (what the webhook schedules by).
func (e *labEnv) waitUnderlayReady(t *testing.T) {
	t.Helper()
	eventually(t, "subnet "+underlaySubnet+" has free addresses", 2*time.Minute, func(ctx context.Context) error {
		var sn estuaryv1.Subnet
		if err := e.c.Get(ctx, client.ObjectKey{Name: underlaySubnet}, &sn); err != nil {
			return err
		}
		if sn.Status.Available == "" || sn.Status.Available == "0" {
			return fmt.Errorf("subnet available %q", sn.Status.Available)
		}
		return nil
	})
	e.waitAvailable(t, underlayNetwork, netmodel.ValueTrue, underlayNodes)
}
