package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/estuary-cni/estuary/test/infra/lab"
	"github.com/estuary-cni/estuary/test/infra/lab/conformance"
)

func conformanceCmd(opts *lab.Options) *cobra.Command {
	o := conformance.Options{}
	var all, dual, netpol bool
	var parallel int
	c := &cobra.Command{
		Use:   "conformance --e2e-test PATH",
		Short: "Run the upstream Kubernetes e2e tests ([sig-network] [Conformance] by default) on the running lab",
		Long: "Runs e2e.test (built by `hack/kube-binaries.sh e2e.test`) against the lab with the lab's kubeconfig,\n" +
			"writes its JSON report into --report-dir, and prints every spec that ran and 'N passed, N failed'.\n" +
			"Exits non-zero when a spec failed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := lab.New(*opts)
			if err != nil {
				return err
			}
			if o.E2ETest == "" {
				return fmt.Errorf("--e2e-test: required (hack/kube-binaries.sh e2e.test prints its directory)")
			}
			if n := countTrue(all, dual, netpol); n > 1 {
				return fmt.Errorf("--all-network, --dual-stack and --network-policy: choose one")
			}
			if all {
				o.Focus = conformance.NetworkAll
			}
			if dual {
				if !cmd.Flags().Changed("focus") {
					o.Focus = conformance.DualStack
				}
				if !cmd.Flags().Changed("skip") {
					o.Skip = conformance.SkipDualStack
				}
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			var sel *conformance.Selection
			if netpol {
				if sel, err = networkPolicyRun(ctx, cmd, &o); err != nil {
					return err
				}
			}
			o.Kubeconfig = l.KubeconfigPath()
			if o.Kubectl == "" {
				o.Kubectl = filepath.Join(filepath.Dir(o.E2ETest), "kubectl")
			}
			o.Output = cmd.OutOrStdout()
			if o.ReportDir, err = filepath.Abs(o.ReportDir); err != nil {
				return fmt.Errorf("--report-dir: %w", err)
			}
			s, err := run(ctx, o, sel, parallel)
			if err != nil {
				return err
			}
			if sel != nil {
				sel.Print(cmd.OutOrStdout())
			}
			s.Print(cmd.OutOrStdout())
			if _, failed, _ := s.Count(); failed > 0 {
				cmd.SilenceUsage = true
				return fmt.Errorf("%d specs failed (report: %s)", failed, conformance.ReportFile(o.ReportDir))
			}
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&o.E2ETest, "e2e-test", "", "path of the e2e.test binary")
	f.StringVar(&o.Kubectl, "kubectl", "", "kubectl the tests run (default: the one next to e2e.test)")
	f.StringVar(&o.Focus, "focus", conformance.NetworkConformance, "ginkgo focus (regular expression over spec names)")
	f.StringVar(&o.Skip, "skip", conformance.SkipDefault, "ginkgo skip")
	f.BoolVar(&all, "all-network", false, "every [sig-network] spec the skip lets through, not only [Conformance]")
	f.BoolVar(&netpol, "network-policy", false, "every NetworkPolicy spec (the Netpol suite) that fits the lab; prints the ones left out and why")
	f.BoolVar(&dual, "dual-stack", false, "the dual-stack specs ([Feature:IPv6DualStack] and the Networking Granular Checks) for a lab up with --ip-family dual")
	f.IntVar(&parallel, "parallel", 1, "run the specs in this many e2e.test processes at once, each with its share (for specs that are not [Serial]; each shard's output goes to its shard-N directory under --report-dir)")
	f.StringVar(&o.ReportDir, "report-dir", "_output/conformance", "where the report and e2e.test's files go")
	f.DurationVar(&o.Timeout, "timeout", 3*time.Hour, "limit of the whole run")
	return c
}

// run runs the specs o selects in one e2e.test process, or in parallel
// processes each with its share: those of sel, or those a dry run lists. A
// spec of sel that did not run counts as failed.
func run(ctx context.Context, o conformance.Options, sel *conformance.Selection, parallel int) (conformance.Summary, error) {
	if parallel <= 1 {
		s, err := conformance.Run(ctx, o)
		if err == nil && sel != nil {
			s.Expect(sel.Run)
		}
		return s, err
	}
	var names []string
	if sel != nil {
		names = sel.Run
	} else {
		var err error
		if names, err = conformance.List(ctx, o.E2ETest, o.Focus, o.Skip); err != nil {
			return conformance.Summary{}, err
		}
	}
	return conformance.RunSharded(ctx, o, names, parallel)
}

// networkPolicyRun sets o up for the NetworkPolicy run (a --focus or --skip
// given on the command line stays), prints which specs it leaves out and why,
// and returns that selection to print again with the results (nil when --skip
// replaced the exclusions).
func networkPolicyRun(ctx context.Context, cmd *cobra.Command, o *conformance.Options) (*conformance.Selection, error) {
	ex := conformance.Active(conformance.NetworkPolicyExclusions)
	if !cmd.Flags().Changed("focus") {
		o.Focus = conformance.NetworkPolicy
	}
	if !cmd.Flags().Changed("skip") {
		o.Skip = conformance.SkipExpression(ex)
	}
	names, err := conformance.List(ctx, o.E2ETest, o.Focus, "")
	if err != nil {
		return nil, err
	}
	if cmd.Flags().Changed("skip") {
		_, _ = fmt.Fprintf(cmd.OutOrStdout(), "%d specs match the focus; --skip %q decides which run\n", len(names), o.Skip)
		return nil, nil
	}
	sel, err := conformance.Select(names, ex)
	if err != nil {
		return nil, err
	}
	sel.Print(cmd.OutOrStdout())
	if len(sel.Run) == 0 {
		return nil, fmt.Errorf("focus %q: no spec to run", o.Focus)
	}
	return &sel, nil
}

func countTrue(b ...bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}
