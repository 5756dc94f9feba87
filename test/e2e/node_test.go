//go:build lab

package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
)

// execResult is what a command run in a lab machine printed and returned.
type execResult struct {
	stdout, stderr string
	code           int
}

// exec runs argv in a lab machine (node-N: its network and mount namespaces)
// through `estuary-lab exec`, with extra environment variables and stdin. A
// non-zero exit is reported in the result, not as an error.
func (e *labEnv) exec(ctx context.Context, target string, vars []string, stdin string, argv ...string) (execResult, error) {
	cmd := exec.CommandContext(ctx, e.bin, e.labArgs(append([]string{"exec", target, "--"}, argv...)...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CNI_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, vars...)
	cmd.Stdin = strings.NewReader(stdin)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := execResult{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		r.code = ee.ExitCode()
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("%s: %s: %w", target, strings.Join(argv, " "), err)
	}
	return r, nil
}

// run runs argv in a lab machine and fails on a non-zero exit.
func (e *labEnv) run(ctx context.Context, target string, argv ...string) (string, error) {
	r, err := e.exec(ctx, target, nil, "", argv...)
	if err != nil {
		return "", err
	}
	if r.code != 0 {
		return r.stdout, fmt.Errorf("%s: %s: exit %d: %s", target, strings.Join(argv, " "), r.code, strings.TrimSpace(r.stderr))
	}
	return r.stdout, nil
}

func (e *labEnv) ctr(ctx context.Context, node string, args ...string) (string, error) {
	return e.run(ctx, node, append([]string{"ctr", "-a", "/run/containerd/containerd.sock", "-n", "k8s.io"}, args...)...)
}

// ociSpec is the part of a container's OCI spec the tests read.
type ociSpec struct {
	Annotations map[string]string `json:"annotations"`
	Linux       struct {
		Namespaces []struct {
			Type string `json:"type"`
			Path string `json:"path"`
		} `json:"namespaces"`
	} `json:"linux"`
}

func (e *labEnv) ctrSpec(ctx context.Context, node, id string) (ociSpec, error) {
	var s ociSpec
	out, err := e.ctr(ctx, node, "containers", "info", "--spec", id)
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		return s, fmt.Errorf("spec of container %s on %s: %w", id, node, err)
	}
	return s, nil
}

// runningTasks maps the id of every running containerd task on node to its
// pid (the lab's nodes share the host's pid namespace).
func (e *labEnv) runningTasks(ctx context.Context, node string) (map[string]int, error) {
	out, err := e.ctr(ctx, node, "tasks", "ls")
	if err != nil {
		return nil, err
	}
	tasks := map[string]int{}
	for _, line := range strings.Split(out, "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 3 || f[2] != "RUNNING" {
			continue
		}
		if pid, err := strconv.Atoi(f[1]); err == nil {
			tasks[f[0]] = pid
		}
	}
	return tasks, nil
}

// sandbox is a pod's CRI sandbox: its id (the CNI container id), the network
// namespace path the runtime gave the CNI plugin, and its pause process.
type sandbox struct {
	ID    string
	NetNS string
	PID   int
}

// netnsPath is the pod's network namespace as the host reaches it.
func (s sandbox) netnsPath() string { return fmt.Sprintf("/proc/%d/ns/net", s.PID) }

// hostVeth is the host side of the pod's eth0.
func (s sandbox) hostVeth() string {
	return podnet.HostVethName(s.ID, "eth0")
}

// sandboxOf finds a running pod's sandbox from its first container: the
// container's spec names the sandbox, the sandbox's spec its network namespace.
func (e *labEnv) sandboxOf(ctx context.Context, p *corev1.Pod) (sandbox, error) {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].ContainerID == "" {
		return sandbox{}, fmt.Errorf("pod %s has no container yet", p.Name)
	}
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	spec, err := e.ctrSpec(ctx, p.Spec.NodeName, id)
	if err != nil {
		return sandbox{}, err
	}
	sb := sandbox{ID: spec.Annotations["io.kubernetes.cri.sandbox-id"]}
	if sb.ID == "" {
		return sandbox{}, fmt.Errorf("container %s of pod %s names no sandbox", id, p.Name)
	}
	if spec, err = e.ctrSpec(ctx, p.Spec.NodeName, sb.ID); err != nil {
		return sandbox{}, err
	}
	for _, n := range spec.Linux.Namespaces {
		if n.Type == "network" {
			sb.NetNS = n.Path
		}
	}
	tasks, err := e.runningTasks(ctx, p.Spec.NodeName)
	if err != nil {
		return sandbox{}, err
	}
	if sb.PID = tasks[sb.ID]; sb.PID == 0 || sb.NetNS == "" {
		return sandbox{}, fmt.Errorf("sandbox %s of pod %s: netns %q, running pid %d", sb.ID, p.Name, sb.NetNS, sb.PID)
	}
	return sb, nil
}

// podNetns is the host path of a running pod's network namespace.
func (e *labEnv) podNetns(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	sb, err := e.sandboxOf(testCtx(t, time.Minute), p)
	if err != nil {
		t.Fatalf("network namespace of pod %s: %v", p.Name, err)
	}
	return sb.netnsPath()
}

// daemonPIDs finds the estuary-daemon processes whose network namespace is
// the node's (the daemon runs in the host network of its node).
func daemonPIDs(nodeNetns string) ([]int, error) { return processPIDs(nodeNetns, daemonName) }

// processPIDs lists the processes of program name in a node's network
// namespace.
func processPIDs(nodeNetns, name string) ([]int, error) {
	want, err := os.Stat(nodeNetns)
	if err != nil {
		return nil, fmt.Errorf("node network namespace: %w", err)
	}
	return pidsOf(name, func(dir string) bool {
		fi, err := os.Stat(filepath.Join(dir, "ns", "net"))
		return err == nil && os.SameFile(fi, want)
	})
}

// pidsOf lists the processes of program name (the base name of argv[0])
// for which keep, given the process's /proc directory, is true.
func pidsOf(name string, keep func(dir string) bool) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		dir := filepath.Join("/proc", d.Name())
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil || filepath.Base(strings.SplitN(string(cmdline), "\x00", 2)[0]) != name {
			continue
		}
		if keep(dir) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// nodeKernel is the estuary state of a node's kernel the tests compare.
type nodeKernel struct {
	veths      map[string]bool // host veths named est*
	podRoutes  map[string]bool // destinations in table 1000
	proxyNeigh map[string]bool // proxy neighbours on the VXLAN device
}

// noTable is ip's answer for a routing table that holds no route.
const noTable = "FIB table does not exist"

// ipJSON runs `ip -j ARGS` on node and returns the values of key in its rows;
// a table without routes has none.
func (e *labEnv) ipJSON(ctx context.Context, node, key string, args ...string) (map[string]bool, error) {
	argv := append([]string{"ip", "-j"}, args...)
	r, err := e.exec(ctx, node, nil, "", argv...)
	if err != nil {
		return nil, err
	}
	if r.code != 0 && strings.Contains(r.stderr, noTable) {
		return map[string]bool{}, nil
	}
	if r.code != 0 {
		return nil, fmt.Errorf("%s: %s: exit %d: %s", node, strings.Join(argv, " "), r.code, strings.TrimSpace(r.stderr))
	}
	out := r.stdout
	var rows []map[string]any
	if strings.TrimSpace(out) != "" {
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			return nil, fmt.Errorf("ip -j %s on %s: %w", strings.Join(args, " "), node, err)
		}
	}
	set := map[string]bool{}
	for _, r := range rows {
		if v, ok := r[key].(string); ok {
			set[v] = true
		}
	}
	return set, nil
}

func (e *labEnv) readKernel(ctx context.Context, node string) (nodeKernel, error) {
	var k nodeKernel
	links, err := e.ipJSON(ctx, node, "ifname", "link", "show", "type", "veth")
	if err != nil {
		return k, err
	}
	k.veths = map[string]bool{}
	for l := range links {
		if strings.HasPrefix(l, vethPrefix) {
			k.veths[l] = true
		}
	}
	if k.podRoutes, err = e.ipJSON(ctx, node, "dst", "route", "show", "table", podTable); err != nil {
		return k, err
	}
	k.proxyNeigh, err = e.ipJSON(ctx, node, "dst", "neigh", "show", "proxy", "dev", vxlanDevice)
	return k, err
}

// livePodsOn lists the pods with an overlay address on node.
func (e *labEnv) livePodsOn(ctx context.Context, node string) ([]corev1.Pod, error) {
	var l corev1.PodList
	if err := e.c.List(ctx, &l, client.MatchingFields{"spec.nodeName": node}); err != nil {
		return nil, fmt.Errorf("list pods on %s: %w", node, err)
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if !p.Spec.HostNetwork && p.Status.PodIP != "" && (p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodPending) {
			out = append(out, p)
		}
	}
	return out, nil
}

// kernelMatchesPods compares node's veths and table 1000 with the pods that
// live there, and requires that no address in gone is still a proxy
// neighbour or a pod route.
func (e *labEnv) kernelMatchesPods(ctx context.Context, node string, gone []string) error {
	pods, err := e.livePodsOn(ctx, node)
	if err != nil {
		return err
	}
	k, err := e.readKernel(ctx, node)
	if err != nil {
		return err
	}
	wantVeths, wantRoutes := map[string]bool{}, map[string]bool{}
	for i := range pods {
		sb, err := e.sandboxOf(ctx, &pods[i])
		if err != nil {
			return err
		}
		wantVeths[sb.hostVeth()] = true
		wantRoutes[pods[i].Status.PodIP] = true
	}
	var problems []string
	problems = append(problems, setDiff("veth", k.veths, wantVeths)...)
	problems = append(problems, setDiff("table "+podTable+" route to", k.podRoutes, wantRoutes)...)
	for _, ip := range gone {
		if k.proxyNeigh[ip] {
			problems = append(problems, "proxy neighbour "+ip+" on "+vxlanDevice+" of a deleted pod")
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s (%d live pods): %s", node, len(pods), strings.Join(problems, "; "))
	}
	return nil
}

// setDiff names what is in got but not want (stale) and the reverse (missing).
func setDiff(what string, got, want map[string]bool) []string {
	var out []string
	for k := range got {
		if !want[k] {
			out = append(out, "stale "+what+" "+k)
		}
	}
	for k := range want {
		if !got[k] {
			out = append(out, "missing "+what+" "+k)
		}
	}
	sort.Strings(out)
	return out
}
