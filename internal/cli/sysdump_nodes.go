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

	"github.com/estuary-cni/estuary/internal/nodereport"
	"github.com/estuary-cni/estuary/internal/policydrops"
	"github.com/estuary-cni/estuary/internal/redact"
)

// nodeStateCommand is the estuary-daemon subcommand that prints a node's
// state (daemon.NodeStateCommandName; the plugin does not import the
// daemon).
const nodeStateCommand = "node-state"

// collectNodes reads every node's state from its daemon pod,
// --node-concurrency at a time. A node without a running daemon pod, or
// whose daemon does not answer, is recorded and skipped.
func (d *dump) collectNodes(ctx context.Context, cfg *rest.Config, fd found) {
	daemons := runningDaemons(fd.pods)
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
// report as JSON and as text, and the node's recent policy drops.
func (d *dump) collectNode(ctx context.Context, ex *daemonEndpoints, node string, pod *corev1.Pod) {
	d.collectDrops(ctx, ex, node, pod)
	ctx, cancel := context.WithTimeout(ctx, d.f.execTimeout)
	defer cancel()
	out, err := execDaemon(ctx, ex, node, pod, nodeStateCommand)
	if err != nil {
		d.failed("%v", err)
		return
	}
	var r nodereport.Report
	if err := json.Unmarshal(out, &r); err != nil {
		d.failed("node %s: pod %s/%s printed no node state: %v", node, pod.Namespace, pod.Name, err)
		d.addText(path.Join("nodes", node, "node-state.out"), string(out))
		return
	}
	d.redactedN(redactReport(&r))
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

// collectDrops runs policy-drops in pod within --exec-timeout and writes
// the node's recent policy drops as JSON.
func (d *dump) collectDrops(ctx context.Context, ex *daemonEndpoints, node string, pod *corev1.Pod) {
	ctx, cancel := context.WithTimeout(ctx, d.f.execTimeout)
	defer cancel()
	out, err := execDaemon(ctx, ex, node, pod, policyDropsCommand)
	if err != nil {
		d.failed("%v", err)
		return
	}
	var r policydrops.Report
	if err := json.Unmarshal(out, &r); err != nil {
		d.failed("node %s: pod %s/%s printed no policy drops: %v", node, pod.Namespace, pod.Name, err)
		d.addText(path.Join("nodes", node, "policy-drops.out"), string(out))
		return
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	d.a.add(path.Join("nodes", node, "policy-drops.json"), append(b, '\n'))
}

// redactReport scrubs r's sections in place and returns how many values it
// replaced. Each section is redacted as one document, so a value that
// spans lines (a YAML block scalar in the conflist's or the daemon's
// configuration, a quoted value broken over lines) goes whole; its lines
// may then be fewer.
func redactReport(r *nodereport.Report) int {
	n := 0
	for i := range r.Sections {
		s := &r.Sections[i]
		if len(s.Lines) > 0 {
			text, c := redact.Text(strings.Join(s.Lines, "\n"))
			if c > 0 {
				s.Lines = strings.Split(text, "\n")
			}
			n += c
		}
		var c int
		s.Error, c = redact.Text(s.Error)
		n += c
	}
	return n
}
