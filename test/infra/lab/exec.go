package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/estuary-cni/estuary/test/infra/lab/netlab"
	"github.com/estuary-cni/estuary/test/infra/lab/proc"
)

// Command returns a command that runs argv inside a lab machine: a node (its
// network, mount and UTS namespaces, as its kubelet sees the world) or one of
// control-plane, router, external, switch (their network namespace).
func (l *Lab) Command(target string, argv []string) (*exec.Cmd, error) {
	if len(argv) == 0 {
		return nil, fmt.Errorf("no command given")
	}
	var pre []string
	if n, ok := l.plan.Node(target); ok {
		pid := proc.ReadPID(filepath.Join(l.paths.Run(), n.Name+"-holder.pid"))
		if pid == 0 || !proc.Alive(pid) {
			return nil, fmt.Errorf("node %s is not running (no live holder process)", target)
		}
		p := strconv.Itoa(pid)
		pre = []string{"nsenter", "--mount=/proc/" + p + "/ns/mnt", "--net=/proc/" + p + "/ns/net", "--uts=/proc/" + p + "/ns/uts", "--"}
	} else {
		ns := map[string]string{"control-plane": l.plan.ControlPlane.NetNS, "router": l.plan.Router.NetNS,
			"external": l.plan.External.NetNS, "switch": l.plan.SwitchNS}[target]
		if ns == "" {
			return nil, fmt.Errorf("unknown lab machine %q (nodes node-1..node-%d, control-plane, router, external, switch)", target, len(l.plan.Nodes))
		}
		if _, err := os.Stat(netlab.Path(ns)); err != nil {
			return nil, fmt.Errorf("%s is not running: %w", target, err)
		}
		pre = []string{"nsenter", "--net=" + netlab.Path(ns), "--"}
	}
	cmd := exec.Command(pre[0], append(pre[1:], argv...)...) //nolint:gosec // G204: runs the command the user asked for, by design
	cmd.Env = append(os.Environ(), "KUBECONFIG="+filepath.Join(l.paths.ControlPlane(), "admin.kubeconfig"))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd, nil
}

// KubeconfigPath is the admin kubeconfig usable from the host.
func (l *Lab) KubeconfigPath() string { return l.paths.Kubeconfig() }
