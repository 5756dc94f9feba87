package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"

	"github.com/estuary-cni/estuary/internal/nodestate"
	"github.com/estuary-cni/estuary/internal/redact"
)

// nodeStateCommand is the estuary-daemon subcommand that prints a node's
// state (daemon.NodeStateCommandName; the plugin does not import the
// daemon).
const nodeStateCommand = "node-state"

// daemonFlagsForNodeState are the daemon flags node-state takes too, by
// the daemon's name and node-state's.
var daemonFlagsForNodeState = [][2]string{
	{healthFlag, "health-address"}, {"cni-conf-dir", "cni-conf-dir"}, {"state-db", "state-db"},
}

// nodeStateArgv is the command that prints a daemon pod's node state as
// JSON: the container's own binary, told where its daemon was configured to
// keep what node-state reads.
func nodeStateArgv(pod *corev1.Pod, c *corev1.Container) []string {
	bin := daemonBinary
	if len(c.Command) > 0 {
		bin = c.Command[0]
	}
	argv := []string{bin, nodeStateCommand, "-o", "json", "--node-name", pod.Spec.NodeName}
	args := append(c.Command[min(1, len(c.Command)):], c.Args...)
	for _, f := range daemonFlagsForNodeState {
		if v, ok := flagValue(args, f[0]); ok {
			argv = append(argv, "--"+f[1], v)
		}
	}
	return argv
}

// collectNodes reads every node's state from its daemon pod,
// --node-concurrency at a time. A node without a running daemon pod, or
// whose daemon does not answer, is recorded and skipped.
func (d *dump) collectNodes(ctx context.Context, cfg *rest.Config, fd found) {
	daemons := map[string]*corev1.Pod{}
	for i := range fd.pods {
		p := &fd.pods[i]
		if p.Labels[nameLabel] == "estuary-daemon" && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			daemons[p.Spec.NodeName] = p
		}
	}
	ex := &daemonEndpoints{cfg: cfg, core: d.cs.CoreV1().RESTClient()}
	sem := make(chan struct{}, d.f.nodeConcurrency)
	var wg sync.WaitGroup
	for _, node := range fd.nodes {
		pod, ok := daemons[node]
		if !ok {
			d.failed("node %s: no running estuary-daemon pod: its state is missing", node)
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			d.collectNode(ctx, ex, node, pod)
		})
	}
	wg.Wait()
}

// collectNode runs node-state in pod within --exec-timeout and writes the
// report as JSON and as text.
func (d *dump) collectNode(ctx context.Context, ex *daemonEndpoints, node string, pod *corev1.Pod) {
	c := container(pod)
	argv := nodeStateArgv(pod, c)
	ctx, cancel := context.WithTimeout(ctx, d.f.execTimeout)
	defer cancel()
	out, err := ex.exec(ctx, pod, c.Name, argv)
	if err != nil {
		hint := ""
		if strings.Contains(err.Error(), "invalid configuration") || strings.Contains(err.Error(), "flag provided but not defined") {
			hint = " (a daemon older than the plugin has no node-state command)"
		}
		d.failed("node %s: exec %q in pod %s/%s: %v%s", node, strings.Join(argv, " "), pod.Namespace, pod.Name, err, hint)
		return
	}
	var r nodestate.Report
	if err := json.Unmarshal(out, &r); err != nil {
		d.failed("node %s: pod %s/%s printed no node state: %v", node, pod.Namespace, pod.Name, err)
		d.addText(path.Join("nodes", node, "node-state.out"), string(out))
		return
	}
	n := 0
	for i := range r.Sections {
		for j, l := range r.Sections[i].Lines {
			var c int
			r.Sections[i].Lines[j], c = redact.Text(l)
			n += c
		}
	}
	d.redactedN(n)
	for _, f := range r.Failed() {
		d.failed("node %s: %s", node, f)
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	d.a.add(path.Join("nodes", node, "node-state.json"), append(b, '\n'))
	var text bytes.Buffer
	_ = r.WriteText(&text)
	d.a.add(path.Join("nodes", node, "node-state.txt"), text.Bytes())
	d.mu.Lock()
	d.sum.Nodes = append(d.sum.Nodes, node)
	d.sum.Daemons[node] = r.Version
	d.mu.Unlock()
}
