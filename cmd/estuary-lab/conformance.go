package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/estuary-cni/estuary/internal/lab"
	"github.com/estuary-cni/estuary/internal/lab/conformance"
)

func conformanceCmd(opts *lab.Options) *cobra.Command {
	o := conformance.Options{}
	var all, dual bool
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
			if all && dual {
				return fmt.Errorf("--all-network and --dual-stack: choose one")
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
			o.Kubeconfig = l.KubeconfigPath()
			if o.Kubectl == "" {
				o.Kubectl = filepath.Join(filepath.Dir(o.E2ETest), "kubectl")
			}
			o.Output = cmd.OutOrStdout()
			if o.ReportDir, err = filepath.Abs(o.ReportDir); err != nil {
				return fmt.Errorf("--report-dir: %w", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			s, err := conformance.Run(ctx, o)
			if err != nil {
				return err
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
	f.BoolVar(&dual, "dual-stack", false, "the dual-stack specs ([Feature:IPv6DualStack] and the Networking Granular Checks) for a lab up with --ip-family dual")
	f.StringVar(&o.ReportDir, "report-dir", "_output/conformance", "where the report and e2e.test's files go")
	f.DurationVar(&o.Timeout, "timeout", 3*time.Hour, "limit of the whole run")
	return c
}
