//go:build lab

// Package lab_test is the lab's end-to-end test: it brings up a real two-node
// cluster with the reference bridge CNI, proves pods, exec, logs and Services work,
// then proves that down leaves nothing behind, also after a killed up.
//
// It needs root and replaces any lab already running on the machine (labs are found
// by their namespace and cgroup prefix). Run: go test -tags lab -timeout 45m ./test/lab/...
package lab_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/test/infra/lab"
	"github.com/estuary-cni/estuary/test/infra/lab/nodens"
)

// hostPaths are places on the host a node's daemons would write to if the node's
// mount namespace did not cover them; none may appear because of the lab.
func hostPaths() []string {
	ps := []string{"/usr/libexec/kubernetes", "/root/.kube"}
	for _, m := range nodens.Mounts {
		ps = append(ps, m.Target)
	}
	return ps
}

func existing(paths []string) map[string]bool {
	out := map[string]bool{}
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			out[p] = true
		}
	}
	return out
}

type env struct {
	hostBefore                   map[string]bool
	bin, repo, state, kubeconfig string
	apiPort, kubeCache           string
}

func setup(t *testing.T) *env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the lab e2e test needs root (network namespaces, mounts, cgroups); run `make test` as root")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := &env{hostBefore: existing(hostPaths()), repo: repo, bin: filepath.Join(dir, "estuary-lab"), state: filepath.Join(dir, "state"), apiPort: "16444"}
	e.kubeconfig = filepath.Join(e.state, "kubeconfig")
	e.kubeCache = filepath.Join(dir, "kubectl-cache")
	build := exec.Command("go", "build", "-o", e.bin, "./cmd/estuary-lab")
	build.Dir = repo
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build estuary-lab: %v\n%s", err, out)
	}
	return e
}

func (e *env) args(a ...string) []string {
	return append([]string{"--state-dir", e.state}, a...)
}

// lab runs estuary-lab and fails the test on error, logging its output.
func (e *env) lab(t *testing.T, timeout time.Duration, a ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, e.args(a...)...)
	cmd.Dir = e.repo
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("estuary-lab %s (%.1fs):\n%s", strings.Join(a, " "), time.Since(start).Seconds(), out)
	if err != nil {
		t.Fatalf("estuary-lab %s: %v", strings.Join(a, " "), err)
	}
	return string(out)
}

// upArgs are the arguments of every up in this test; ESTUARY_LAB_PROXY_MODE selects
// kube-proxy's mode (iptables by default).
func (e *env) upArgs() []string {
	mode := os.Getenv("ESTUARY_LAB_PROXY_MODE")
	if mode == "" {
		mode = "iptables"
	}
	return []string{"up", "--nodes", "2", "--cni", "bridge", "--proxy-mode", mode, "--api-port", e.apiPort, "--repo", e.repo}
}

func (e *env) up(t *testing.T) {
	e.lab(t, 35*time.Minute, e.upArgs()...) // a first up may build every binary
}

func (e *env) kubectl(ctx context.Context, a ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(e.binDir(), "kubectl"), append([]string{"--kubeconfig", e.kubeconfig, "--cache-dir", e.kubeCache}, a...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(a, " "), err, out)
	}
	return string(out), nil
}

func (e *env) binDir() string {
	var st struct{ BinDir string }
	b, _ := os.ReadFile(filepath.Join(e.state, "state.json"))
	_ = json.Unmarshal(b, &st)
	return st.BinDir
}

func (e *env) status() (*lab.Status, error) {
	out, err := exec.Command(e.bin, e.args("status", "-o", "json")...).Output()
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	var s lab.Status
	if err := json.Unmarshal(out, &s); err != nil {
		return nil, fmt.Errorf("parse status: %w", err)
	}
	return &s, nil
}

// eventually retries f until it succeeds or the deadline passes.
func eventually(t *testing.T, what string, timeout time.Duration, f func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err = f(ctx)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s: not true after %s: %v", what, timeout, err)
}

func (e *env) downAndCheck(t *testing.T) {
	t.Helper()
	procs := labProcesses(e.state)
	if len(procs) == 0 {
		t.Fatal("no process of the lab runs before down; the test would prove nothing")
	}
	e.lab(t, 3*time.Minute, "down")
	requireGone(t, procs)
	left := lab.Leftovers(e.state)
	for p := range existing(hostPaths()) {
		if !e.hostBefore[p] {
			left = append(left, "host path "+p)
		}
	}
	if len(left) > 0 {
		t.Fatalf("down left behind:\n  %s", strings.Join(left, "\n  "))
	}
}

func TestLab(t *testing.T) {
	e := setup(t)
	e.up(t)
	t.Cleanup(func() {
		if t.Failed() {
			_ = exec.Command(e.bin, e.args("down")...).Run()
		}
	})
	t.Run("status", func(t *testing.T) { checkStatus(t, e) })
	t.Run("workloads", func(t *testing.T) { checkWorkloads(t, e) })
	t.Run("down leaves nothing", func(t *testing.T) { e.downAndCheck(t) })
	t.Run("killed up then down then up", func(t *testing.T) { checkKilledUp(t, e) })
}

func checkStatus(t *testing.T, e *env) {
	s, err := e.status()
	if err != nil {
		t.Fatal(err)
	}
	if s.Phase != "running" || s.CNI != "bridge" || len(s.Nodes) != 2 || s.Router.ASN == 0 ||
		s.Switch.CIDR == "" || s.External.Address == "" {
		t.Fatalf("status: %+v", s)
	}
	for _, n := range s.Nodes {
		if n.Ready == nil || !*n.Ready {
			t.Errorf("node %s not Ready in status", n.Name)
		}
	}
	if s.Capabilities.VLAN {
		t.Logf("kernel has 802.1Q VLAN")
	} else {
		t.Logf("kernel lacks 802.1Q VLAN: %s", s.Capabilities.Detail)
	}
}
