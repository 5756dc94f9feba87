package cli

// sysdump: one archive with what a maintainer needs to see a cluster's
// estuary without access to it.
//
// It reads, with the user's own credentials and never a Secret: estuary's
// objects and CRDs, the chart's workloads and their configuration, Nodes,
// Events; the logs of the manager and every daemon pod (pods/log); and each
// node's networking state and the packets its policy table dropped lately,
// by running `estuary-daemon node-state` and `estuary-daemon policy-drops`
// in the node's daemon pod (pods/exec: the image has no shell). Everything passes
// the redaction of package redact before it is written.
//
// A cluster that needs a sysdump is often broken, so no part that fails
// stops the others: a kind the API server does not serve, a
// log that cannot be read, a node whose daemon does not answer within
// --exec-timeout, each is written to errors.txt and the dump goes on. Only
// an archive that cannot be written fails the command. Logs keep their last
// --max-log-bytes, and nodes are read --node-concurrency at a time.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/redact"
	"github.com/estuary-cni/estuary/internal/version"
)

// sysdumpFlags are sysdump's options.
type sysdumpFlags struct {
	output          string
	since           time.Duration
	nodeConcurrency int
	maxLogBytes     int
	execTimeout     time.Duration
	logTimeout      time.Duration
}

func sysdumpCmd(o *options) *cobra.Command {
	f := sysdumpFlags{}
	c := &cobra.Command{
		Use:   "sysdump",
		Short: "Write one archive with estuary's objects, logs, events and every node's networking state, secrets redacted",
		Long: `sysdump writes a .tar.gz for a maintainer: estuary's objects and CRDs, the chart's
workloads, ConfigMaps, RBAC and webhook configurations, Nodes and the Events about them
and about estuary's objects and pod networking, as YAML; the current and previous logs of
the estuary-manager and every estuary-daemon pod; and, from each node's daemon pod
(pods/exec), its links, addresses, rules, routes of every table, neighbours, FDB, tc and
BPF filters, nftables, sysctls, endpoint store and BGP peers, and the packets its policy
table dropped lately (nodes/<node>/policy-drops.json). summary.txt says what was
collected and which versions run; errors.txt lists what could not be read, which never
stops the rest.

Secrets are never read. Values whose name or content says credential (passwords, tokens,
private keys, kubeconfig credentials, env vars named so) are replaced by REDACTED.
-n limits the search for estuary's workloads to one namespace.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			namespace := ""
			if cmd.Flags().Changed("namespace") {
				namespace = o.ns()
			}
			return runSysdump(cmd.Context(), o, f, namespace)
		},
	}
	fl := c.Flags()
	fl.StringVar(&f.output, "output", "", "archive to write (default: estuary-sysdump-<UTC time>.tar.gz in the current directory)")
	fl.DurationVar(&f.since, "since", 0, "only logs and events newer than this (e.g. 2h); 0: all the API server keeps")
	fl.IntVar(&f.nodeConcurrency, "node-concurrency", 5, "how many nodes' daemon pods are read at once")
	fl.IntVar(&f.maxLogBytes, "max-log-bytes", 8<<20, "keep at most the last this many bytes of each container log")
	fl.DurationVar(&f.execTimeout, "exec-timeout", nodeExecTimeout, "how long one node's daemon may take to print its state")
	fl.DurationVar(&f.logTimeout, "log-timeout", time.Minute, "how long reading one container log may take")
	return c
}

func (f sysdumpFlags) validate() error {
	switch {
	case f.since < 0:
		return fmt.Errorf("sysdump: --since %s is negative", f.since)
	case f.nodeConcurrency < 1:
		return fmt.Errorf("sysdump: --node-concurrency %d: want at least 1", f.nodeConcurrency)
	case f.maxLogBytes < 1024:
		return fmt.Errorf("sysdump: --max-log-bytes %d: want at least 1024", f.maxLogBytes)
	case f.execTimeout <= 0 || f.logTimeout <= 0:
		return fmt.Errorf("sysdump: --exec-timeout and --log-timeout must be positive")
	}
	return nil
}

// sysdumpSummary is summary.json, and what summary.txt says.
type sysdumpSummary struct {
	Started    time.Time         `json:"started"`
	Finished   time.Time         `json:"finished"`
	Plugin     version.Info      `json:"plugin"`
	Cluster    string            `json:"cluster"`
	Components []Component       `json:"components"`
	Daemons    map[string]string `json:"daemons"` // node -> version its daemon reported
	Namespaces []string          `json:"namespaces"`
	Objects    map[string]int    `json:"objects"` // archive file -> objects in it
	Logs       []string          `json:"logs"`
	Truncated  []string          `json:"truncatedLogs,omitempty"`
	Nodes      []string          `json:"nodes"` // nodes whose state was read
	Redacted   int               `json:"redacted"`
	Failed     []string          `json:"failed"`
	Since      string            `json:"since,omitempty"`
	Files      []string          `json:"files"`
}

// dump is one run's shared state.
type dump struct {
	o     *options
	f     sysdumpFlags
	k     client.Client
	cs    kubernetes.Interface
	a     *archive
	start time.Time

	mu  sync.Mutex
	sum sysdumpSummary
}

// failed records what could not be collected.
func (d *dump) failed(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sum.Failed = append(d.sum.Failed, fmt.Sprintf(format, args...))
}

func (d *dump) redactedN(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sum.Redacted += n
}

// addText writes a text file after redacting it.
func (d *dump) addText(name, s string) {
	s, n := redact.Text(s)
	d.redactedN(n)
	d.a.add(name, []byte(s))
}

func runSysdump(ctx context.Context, o *options, f sysdumpFlags, namespace string) error {
	cfg, err := o.config()
	if err != nil {
		return err
	}
	k, err := o.newClient()
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("sysdump: API client: %w", err)
	}
	start := time.Now().UTC()
	top := "estuary-sysdump-" + start.Format("20060102-150405")
	if f.output == "" {
		f.output = top + ".tar.gz"
	}
	a, err := createArchive(f.output, top)
	if err != nil {
		return fmt.Errorf("sysdump: %w", err)
	}
	d := &dump{o: o, f: f, k: k, cs: cs, a: a, start: start,
		sum: sysdumpSummary{Started: start, Plugin: version.Get(), Daemons: map[string]string{}, Objects: map[string]int{}}}
	if f.since > 0 {
		d.sum.Since = f.since.String()
	}
	progress := func(format string, args ...any) { _ = say(o.streams.Err, "sysdump: "+format, args...) }

	progress("collecting objects")
	found := d.collectObjects(ctx, namespace)
	progress("collecting logs of %d pods and the state of %d nodes", len(found.pods), len(found.nodes))
	var wg sync.WaitGroup
	wg.Go(func() { d.collectLogs(ctx, found.pods) })
	wg.Go(func() { d.collectNodes(ctx, cfg, found) })
	wg.Wait()
	d.finish()
	if err := a.close(); err != nil {
		return fmt.Errorf("sysdump: %w", err)
	}
	if n := len(d.sum.Failed); n > 0 {
		progress("%d parts could not be collected: see errors.txt in the archive", n)
	}
	return say(o.streams.Out, "%s", f.output)
}

// finish writes the summary and the errors.
func (d *dump) finish() {
	d.mu.Lock()
	s := d.sum
	d.mu.Unlock()
	s.Finished = time.Now().UTC()
	slices.Sort(s.Logs)
	slices.Sort(s.Nodes)
	slices.Sort(s.Failed)
	slices.Sort(s.Truncated)
	s.Files = append(d.a.list(), "summary.json", "summary.txt", "errors.txt")
	slices.Sort(s.Files)
	errs := "none\n"
	if len(s.Failed) > 0 {
		errs = strings.Join(s.Failed, "\n") + "\n"
	}
	d.addText("errors.txt", errs)
	b, _ := json.MarshalIndent(s, "", "  ")
	d.a.add("summary.json", append(b, '\n'))
	d.a.add("summary.txt", []byte(summaryText(s)))
}

func summaryText(s sysdumpSummary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "estuary sysdump, %s to %s\n", s.Started.Format(time.RFC3339), s.Finished.Format(time.RFC3339))
	fmt.Fprintf(&b, "plugin:   kubectl-estuary %s\n", s.Plugin)
	fmt.Fprintf(&b, "cluster:  Kubernetes %s\n", orDash(s.Cluster))
	for _, c := range s.Components {
		fmt.Fprintf(&b, "server:   %s %s/%s %s %s\n", c.Kind, c.Namespace, c.Name, orDash(c.Version), strings.Join(c.Images, ","))
	}
	nodes := make([]string, 0, len(s.Daemons))
	for n := range s.Daemons {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		fmt.Fprintf(&b, "daemon:   %s: %s\n", n, s.Daemons[n])
	}
	if s.Since != "" {
		fmt.Fprintf(&b, "since:    logs and events of the last %s\n", s.Since)
	}
	fmt.Fprintf(&b, "namespaces: %s\n", strings.Join(s.Namespaces, ", "))
	files := make([]string, 0, len(s.Objects))
	for f := range s.Objects {
		files = append(files, f)
	}
	slices.Sort(files)
	fmt.Fprintf(&b, "\nobjects (%d files):\n", len(files))
	for _, f := range files {
		fmt.Fprintf(&b, "  %-60s %d\n", f, s.Objects[f])
	}
	fmt.Fprintf(&b, "\nlogs (%d, %d truncated to their last bytes):\n", len(s.Logs), len(s.Truncated))
	for _, l := range s.Logs {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Fprintf(&b, "\nnode state (%d nodes): %s\n", len(s.Nodes), strings.Join(s.Nodes, ", "))
	fmt.Fprintf(&b, "\nredacted values: %d\n", s.Redacted)
	fmt.Fprintf(&b, "\nnot collected (%d):\n", len(s.Failed))
	for _, f := range s.Failed {
		fmt.Fprintf(&b, "  %s\n", f)
	}
	return b.String()
}
