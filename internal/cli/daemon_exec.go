package cli

// Running an estuary-daemon subcommand in a node's daemon pod (pods/exec:
// the image has no shell), as sysdump and `policy drops` do: the
// container's own binary, told where its daemon was configured to keep
// what the subcommand reads.

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// policyDropsCommand is the estuary-daemon subcommand that prints the
// drops the node's policy table logged, as a policydrops.Report (the
// plugin does not import the daemon).
const policyDropsCommand = "policy-drops"

// daemonFlagsForNodeState are the daemon flags node-state (and
// policy-drops) take too, by the daemon's name and the subcommand's.
var daemonFlagsForNodeState = [][2]string{
	{healthFlag, "health-address"}, {"cni-conf-dir", "cni-conf-dir"}, {"state-db", "state-db"},
}

// daemonArgv is the command that prints subcommand's report of pod's node
// as JSON: the container's own binary, with the daemon flags the
// subcommand shares.
func daemonArgv(pod *corev1.Pod, c *corev1.Container, subcommand string) []string {
	bin := daemonBinary
	if len(c.Command) > 0 {
		bin = c.Command[0]
	}
	argv := []string{bin, subcommand, "-o", "json", "--node-name", pod.Spec.NodeName}
	args := append(c.Command[min(1, len(c.Command)):], c.Args...)
	for _, f := range daemonFlagsForNodeState {
		if v, ok := flagValue(args, f[0]); ok {
			argv = append(argv, "--"+f[1], v)
		}
	}
	return argv
}

// runningDaemons are the running estuary-daemon pods of pods by node.
func runningDaemons(pods []corev1.Pod) map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for i := range pods {
		p := &pods[i]
		if p.Labels[nameLabel] == "estuary-daemon" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = p
		}
	}
	return out
}

// execDaemon runs subcommand in pod's daemon container within ctx and
// returns what it printed; the error names the node, the command and the
// pod, and says when the daemon is older than the subcommand.
func execDaemon(ctx context.Context, ex *daemonEndpoints, node string, pod *corev1.Pod, subcommand string) ([]byte, error) {
	c := container(pod)
	argv := daemonArgv(pod, c, subcommand)
	out, err := ex.exec(ctx, pod, c.Name, argv)
	if err != nil {
		return nil, fmt.Errorf("node %s: exec %q in pod %s/%s: %w%s", node, strings.Join(argv, " "), pod.Namespace, pod.Name, err, olderDaemonHint(err, subcommand))
	}
	return out, nil
}

// olderDaemonHint says, after err, that a daemon older than the plugin
// lacks subcommand: such a daemon takes the subcommand for a stray
// argument, starts as a daemon and refuses its configuration.
func olderDaemonHint(err error, subcommand string) string {
	if s := err.Error(); strings.Contains(s, "invalid configuration") || strings.Contains(s, "flag provided but not defined") {
		return fmt.Sprintf(" (a daemon older than the plugin has no %s command)", subcommand)
	}
	return ""
}
