package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// docVars are the values the lab gives the install guide's variables: its pod
// range, its registry (plain HTTP) and the release it pushed there.
func (l *Lab) docVars(st *State) map[string]string {
	v := map[string]string{"POD_CIDR": l.plan.Pods.String()}
	if e := st.Estuary; e != nil {
		v["REGISTRY"], v["VERSION"], v["HELM_FLAGS"] = e.Registry, e.ChartVersion, "--plain-http"
	}
	return v
}

// docDir is where the guide's install steps run (the files they write stay there).
func (p Paths) docDir() string { return filepath.Join(p.estuaryDir(), "install-guide") }

// installEstuaryFromDoc installs estuary on a kubeadm cluster with the
// guide's own install and check steps, after recording that nodes and
// CoreDNS wait for a CNI, as on any fresh kubeadm cluster.
func (l *Lab) installEstuaryFromDoc(ctx context.Context, st *State, doc InstallDoc) error {
	if err := l.stageEstuary(ctx, st); err != nil {
		return err
	}
	k := st.Kubeadm
	var err error
	if k.NodesReadyBeforeInstall, k.CoreDNSReadyBeforeInstall, err = l.readiness(ctx, st.BinDir); err != nil {
		return err
	}
	l.step("before estuary: %d of %d nodes Ready, %d CoreDNS replicas ready", k.NodesReadyBeforeInstall,
		len(l.plan.Nodes), k.CoreDNSReadyBeforeInstall)
	dir := l.paths.docDir()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	for _, step := range DocInstallSteps {
		l.step("%s (%s, step %s):\n%s", InstallDocPath, dir, step, indent(doc[step]))
		if err := l.runDocStep(ctx, st, step, doc[step], dir); err != nil {
			return err
		}
		k.Steps = append(k.Steps, step)
	}
	// The guide's values file is the release's values for later upgrades.
	if files, _ := filepath.Glob(filepath.Join(dir, "*.yaml")); len(files) == 1 {
		st.Estuary.Values = files[0]
	}
	return l.awaitEstuary(ctx, st)
}

// runDocStep runs one step of the guide with bash -euo pipefail in dir, the
// guide's variables, the lab's kubeconfig, and helm and kubectl on PATH.
func (l *Lab) runDocStep(ctx context.Context, st *State, step, script, dir string) error {
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script) //nolint:gosec // G204: the install guide's own commands, by design
	cmd.Dir = dir
	env := append(os.Environ(), l.helmEnv()...)
	env = append(env, "KUBECONFIG="+l.paths.Kubeconfig(),
		"PATH="+filepath.Dir(st.Estuary.Helm)+":"+st.BinDir+":"+os.Getenv("PATH"))
	for k, v := range l.docVars(st) {
		env = append(env, k+"="+v)
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	logPath := l.paths.Log("install-guide-" + step)
	_ = os.WriteFile(logPath, out, 0o600)
	if err != nil {
		return fmt.Errorf("%s step %s: %w\n%s", InstallDocPath, step, err, lastLines(string(out), 20))
	}
	return nil
}

// readiness counts the Ready nodes and CoreDNS's ready replicas.
func (l *Lab) readiness(ctx context.Context, bin string) (nodes, coreDNS int, err error) {
	st, err := l.nodeStatuses(ctx, bin)
	if err != nil {
		return 0, 0, err
	}
	for _, n := range st {
		if n.Ready {
			nodes++
		}
	}
	out, err := l.kubectl(ctx, bin, "-n", "kube-system", "get", "deployment", "coredns", "-o", "json")
	if err != nil {
		return 0, 0, err
	}
	var d struct {
		Status struct {
			ReadyReplicas int `json:"readyReplicas"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		return 0, 0, fmt.Errorf("parse deployment coredns: %w", err)
	}
	return nodes, d.Status.ReadyReplicas, nil
}

func indent(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = "             " + l
	}
	return strings.Join(lines, "\n")
}
