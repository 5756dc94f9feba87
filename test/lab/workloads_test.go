//go:build lab

package lab_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab"
)

const manifests = `
apiVersion: v1
kind: Pod
metadata: {name: server-1, labels: {app: server-1}}
spec:
  nodeName: node-1
  containers:
  - {name: netexec, image: %[1]s, imagePullPolicy: Never, args: [netexec, --http-port=8080]}
---
apiVersion: v1
kind: Pod
metadata: {name: server-2, labels: {app: server-2}}
spec:
  nodeName: node-2
  containers:
  - {name: netexec, image: %[1]s, imagePullPolicy: Never, args: [netexec, --http-port=8080]}
---
apiVersion: v1
kind: Pod
metadata: {name: client, labels: {app: client}}
spec:
  nodeName: node-1
  containers:
  - {name: netexec, image: %[1]s, imagePullPolicy: Never, args: [netexec, --http-port=8080]}
---
apiVersion: v1
kind: Service
metadata: {name: server-1}
spec:
  selector: {app: server-1}
  ports: [{port: 80, targetPort: 8080}]
`

func checkWorkloads(t *testing.T, e *env) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	apply := exec.CommandContext(ctx, filepath.Join(e.binDir(), "kubectl"), "--kubeconfig", e.kubeconfig, "--cache-dir", e.kubeCache, "apply", "-f", "-")
	apply.Stdin = strings.NewReader(fmt.Sprintf(manifests, lab.AgnhostImage))
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	if out, err := e.kubectl(ctx, "wait", "--for=condition=Ready", "pod/server-1", "pod/server-2", "pod/client", "--timeout=180s"); err != nil {
		pods, _ := e.kubectl(ctx, "get", "pods", "-o", "wide")
		events, _ := e.kubectl(ctx, "get", "events")
		t.Fatalf("pods not Ready: %v\n%s\n%s\n%s", err, out, pods, events)
	}
	ip := func(pod string) string {
		out, err := e.kubectl(ctx, "get", "pod", pod, "-o", "jsonpath={.status.podIP} {.spec.nodeName}")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %s", pod, out)
		return strings.Fields(out)[0]
	}
	server2IP := ip("server-2")
	server1IP := ip("server-1")
	ip("client")
	svcIP, err := e.kubectl(ctx, "get", "service", "server-1", "-o", "jsonpath={.spec.clusterIP}")
	if err != nil {
		t.Fatal(err)
	}

	// exec runs a command inside the client pod; it connects to a Ready pod
	// on the same node by address, so it does not wait on kube-proxy (the
	// Service is checked, with a deadline, in the next subtest).
	t.Run("exec", func(t *testing.T) {
		out, err := e.kubectl(ctx, "exec", "client", "--", "/agnhost", "connect", server1IP+":8080", "--timeout=5s")
		if err != nil {
			t.Fatalf("kubectl exec: %v\n%s", err, out)
		}
	})
	t.Run("service on the same node", func(t *testing.T) {
		dial(t, e, svcIP, "80", "server-1")
	})
	t.Run("pod on another node", func(t *testing.T) {
		dial(t, e, server2IP, "8080", "server-2")
	})
	t.Run("external host reaches pod IP", func(t *testing.T) {
		eventually(t, "external -> "+server2IP, time.Minute, func(ctx context.Context) error {
			cmd := exec.CommandContext(ctx, e.bin, e.args("exec", "external", "--",
				filepath.Join(e.binDir(), "agnhost"), "connect", server2IP+":8080", "--timeout=3s")...)
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return nil
		})
	})
	t.Run("logs", func(t *testing.T) {
		out, err := e.kubectl(ctx, "logs", "server-1")
		if err != nil || !strings.Contains(out, "8080") {
			t.Fatalf("kubectl logs server-1: %v\n%s", err, out)
		}
	})
}

// dial makes the client pod fetch /hostname from host:port (netexec's /dial, called
// through the API server's pod proxy) and expects want back.
func dial(t *testing.T, e *env, host, port, want string) {
	path := fmt.Sprintf("/api/v1/namespaces/default/pods/client:8080/proxy/dial?request=hostname&protocol=http&host=%s&port=%s&tries=1", host, port)
	eventually(t, "client -> "+host+":"+port, 2*time.Minute, func(ctx context.Context) error {
		out, err := e.kubectl(ctx, "get", "--raw", path)
		if err != nil {
			return err
		}
		var r struct{ Responses, Errors []string }
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			return fmt.Errorf("parse %q: %w", out, err)
		}
		if len(r.Responses) != 1 || r.Responses[0] != want {
			return fmt.Errorf("dial %s:%s answered %q, errors %q; want %q", host, port, r.Responses, r.Errors, want)
		}
		return nil
	})
}

// checkKilledUp kills an up once nodes have begun starting (containerd runs, pods
// may not), then
// requires down to clean up completely and a fresh up to succeed.
func checkKilledUp(t *testing.T, e *env) {
	cmd := exec.Command(e.bin, e.args(e.upArgs()...)...)
	cmd.Dir = e.repo
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	sc := bufio.NewScanner(out)
	killed := false
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "containerd ready") {
			if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatalf("kill up's process group: %v", err)
			}
			killed = true
			break
		}
	}
	_ = cmd.Wait()
	t.Logf("killed up output:\n%s", log.String())
	if !killed {
		t.Fatal("up ended before any node started; nothing to kill")
	}
	if pids := lab.Leftovers(e.state); len(pids) == 0 {
		t.Fatal("a killed up left nothing running; the test did not exercise cleanup")
	}
	e.downAndCheck(t)
	e.up(t)
	e.downAndCheck(t)
	if _, err := os.Stat(e.state); err == nil {
		t.Errorf("state dir %s still exists after down", e.state)
	}
}
