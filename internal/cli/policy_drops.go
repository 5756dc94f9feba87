package cli

// `policy drops`: the packets the nodes' policy tables dropped lately, as
// each node's daemon keeps them (a bounded ring of the netlink log of its
// drop rules), read by running `estuary-daemon policy-drops` in the daemon
// pods (pods/exec) and merged oldest first.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/policydrops"
)

// dropsFlags are `policy drops`' options.
type dropsFlags struct {
	node, output                    string
	since, execTimeout              time.Duration
	daemonNamespace, daemonSelector string
}

func policyDropsCmd(o *options) *cobra.Command {
	f := dropsFlags{}
	c := &cobra.Command{
		Use:   "drops",
		Short: "List the packets the nodes' policy tables dropped lately, with the policy that dropped each",
		Long: `drops runs 'estuary-daemon policy-drops' in every estuary-daemon pod (or the one on
--node) through pods/exec and prints the drops they hold, oldest first: when, on which
node, in which direction, the local pod, the policy whose Deny rule dropped the packet
(or "isolation": a NetworkPolicy selects the pod and none of its rules admits the
packet), and the packet's protocol, source and destination. Each daemon keeps its most
recent drops (the log is rate-limited); a line per node says how many older ones it no
longer holds. A daemon that cannot be read, or is older than the plugin and has no
policy-drops command, is reported and the other nodes are still listed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkReportFormat("policy drops", f.output); err != nil {
				return err
			}
			if f.since < 0 || f.execTimeout <= 0 {
				return fmt.Errorf("policy drops: --since must not be negative and --exec-timeout must be positive")
			}
			return runPolicyDrops(cmd.Context(), o, f)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.node, "node", "", "read only this node's daemon")
	fl.DurationVar(&f.since, "since", 0, "only drops newer than this (e.g. 10m); 0: all the daemons hold")
	fl.StringVarP(&f.output, "output", "o", "text", reportFormats)
	fl.DurationVar(&f.execTimeout, "exec-timeout", nodeExecTimeout, "how long one node's daemon may take to answer")
	fl.StringVar(&f.daemonNamespace, "daemon-namespace", defaultDaemonNamespace, "namespace of the estuary-daemon pods")
	fl.StringVar(&f.daemonSelector, "daemon-selector", defaultDaemonSelector, "label selector of the estuary-daemon pods")
	return c
}

// nodeDrop is a drop and the node whose daemon holds it.
type nodeDrop struct {
	Node string `json:"node"`
	policydrops.Drop
}

// dropsNode is what one node's daemon answered.
type dropsNode struct {
	Node string `json:"node"`
	// Held is how many drops the daemon holds; Lost how many older ones
	// it no longer holds.
	Held  int    `json:"held"`
	Lost  uint64 `json:"lost"`
	Error string `json:"error,omitempty"`
}

// dropsReport is `policy drops -o json`.
type dropsReport struct {
	Since string      `json:"since,omitempty"`
	Drops []nodeDrop  `json:"drops"`
	Nodes []dropsNode `json:"nodes"`
}

// nodeAnswer is one node's report, or why there is none.
type nodeAnswer struct {
	Node   string
	Report policydrops.Report
	Err    error
}

func runPolicyDrops(ctx context.Context, o *options, f dropsFlags) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	k, err := o.newClient()
	if err != nil {
		return err
	}
	ex, err := newDaemonEndpoints(cfg, k, f.daemonNamespace, f.daemonSelector)
	if err != nil {
		return fmt.Errorf("policy drops: %w", err)
	}
	pods, err := dropsDaemons(ctx, ex, f.node)
	if err != nil {
		return fmt.Errorf("policy drops: %w", err)
	}
	answers := readDrops(ctx, ex, pods, f.execTimeout)
	r := mergeDrops(answers, f.since, time.Now())
	if f.output != "text" {
		if err := report(o.streams.Out, f.output, r); err != nil {
			return err
		}
	} else if err := writeDrops(o.streams.Out, r); err != nil {
		return err
	}
	if len(r.Nodes) > 0 && !slices.ContainsFunc(r.Nodes, func(n dropsNode) bool { return n.Error == "" }) {
		return fmt.Errorf("policy drops: no node's daemon could be read")
	}
	return nil
}

// dropsDaemons are the running daemon pods by node: node's alone when
// node is set.
func dropsDaemons(ctx context.Context, ex *daemonEndpoints, node string) (map[string]*corev1.Pod, error) {
	if node != "" {
		p, err := ex.daemonPod(ctx, node)
		if err != nil {
			return nil, fmt.Errorf("node %s: %w", node, err)
		}
		return map[string]*corev1.Pod{node: p}, nil
	}
	var pods corev1.PodList
	if err := ex.k.List(ctx, &pods, client.InNamespace(ex.ns), client.MatchingLabelsSelector{Selector: ex.selector}); err != nil {
		return nil, fmt.Errorf("list daemon pods in %s (%s): %w", ex.ns, ex.selector, err)
	}
	out := map[string]*corev1.Pod{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			out[p.Spec.NodeName] = p
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no running daemon pod in namespace %s with selector %s (see --daemon-namespace, --daemon-selector)", ex.ns, ex.selector)
	}
	return out, nil
}

// readDrops runs policy-drops in each pod, a few at a time.
func readDrops(ctx context.Context, ex *daemonEndpoints, pods map[string]*corev1.Pod, timeout time.Duration) []nodeAnswer {
	var (
		mu  sync.Mutex
		out []nodeAnswer
		wg  sync.WaitGroup
		sem = make(chan struct{}, 5)
	)
	for node, pod := range pods {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			a := nodeAnswer{Node: node}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			b, err := execDaemon(ctx, ex, node, pod, policyDropsCommand)
			switch {
			case err != nil:
				a.Err = err
			default:
				if err := json.Unmarshal(b, &a.Report); err != nil {
					a.Err = fmt.Errorf("node %s: pod %s/%s printed no policy drops: %w", node, pod.Namespace, pod.Name, err)
				}
			}
			mu.Lock()
			out = append(out, a)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// mergeDrops merges the nodes' answers into one report: the drops newer
// than since (all when 0) before now, oldest first, and one entry per node
// by name.
func mergeDrops(answers []nodeAnswer, since time.Duration, now time.Time) dropsReport {
	r := dropsReport{Drops: []nodeDrop{}, Nodes: []dropsNode{}}
	if since > 0 {
		r.Since = since.String()
	}
	for _, a := range answers {
		n := dropsNode{Node: a.Node}
		if a.Err != nil {
			n.Error = a.Err.Error()
			r.Nodes = append(r.Nodes, n)
			continue
		}
		n.Held, n.Lost = len(a.Report.Drops), a.Report.Lost
		r.Nodes = append(r.Nodes, n)
		for _, d := range a.Report.Drops {
			if since > 0 && d.Time.Before(now.Add(-since)) {
				continue
			}
			r.Drops = append(r.Drops, nodeDrop{Node: a.Node, Drop: d})
		}
	}
	slices.SortFunc(r.Nodes, func(a, b dropsNode) int { return strings.Compare(a.Node, b.Node) })
	slices.SortStableFunc(r.Drops, func(a, b nodeDrop) int {
		if c := a.Time.Compare(b.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Node, b.Node)
	})
	return r
}

// writeDrops prints the report as a table, then what each node said when
// it is more than its drops.
func writeDrops(w io.Writer, r dropsReport) error {
	if len(r.Drops) == 0 {
		what := "no policy drops held"
		if r.Since != "" {
			what = "no policy drops in the last " + r.Since
		}
		if err := say(w, "%s", what); err != nil {
			return err
		}
	} else {
		t := newTable()
		t.row("TIME\tNODE\tDIRECTION\tPOD\tPOLICY\tPROTO\tSRC -> DST\n")
		for _, d := range r.Drops {
			t.row("%s\t%s\t%s\t%s\t%s\t%s\t%s -> %s\n", d.Time.UTC().Format(time.RFC3339), d.Node, d.Direction,
				dropPod(d.Drop), dropPolicy(d.Policy), d.Protocol, hostPort(d.Src, d.SrcPort), hostPort(d.Dst, d.DstPort))
		}
		if err := t.writeTo(w); err != nil {
			return err
		}
	}
	for _, n := range r.Nodes {
		var err error
		switch {
		case n.Error != "":
			err = say(w, "%s", n.Error)
		case n.Lost > 0:
			err = say(w, "node %s: holds its last %d drops; %d older ones are no longer held", n.Node, n.Held, n.Lost)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// dropPod is the drop's pod, else its host veth.
func dropPod(d policydrops.Drop) string {
	if d.Pod != "" {
		return d.Pod
	}
	return "veth " + d.HostVeth
}

// dropPolicy names what dropped a packet: a policy, or the pod's
// isolation.
func dropPolicy(p string) string {
	if p == "" {
		return "isolation"
	}
	return p
}

func hostPort(addr string, port uint16) string {
	if port == 0 {
		return addr
	}
	return net.JoinHostPort(addr, strconv.Itoa(int(port)))
}
