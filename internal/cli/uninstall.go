package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/estuary-cni/estuary/internal/uninstall"
)

// uninstallCmd is `kubectl estuary uninstall`: the chart's pre-delete hook
// for installs Helm did not make (manifests applied by hand or by GitOps).
func uninstallCmd(o *options) *cobra.Command {
	var (
		yes, withdraw bool
		ns, ds        string
		timeout       time.Duration
	)
	c := &cobra.Command{
		Use:   "uninstall",
		Short: "Take estuary off every node: each daemon stops serving, removes what estuary made and restores what it replaced (asks first unless --yes)",
		Long: `Take estuary off every node. Every daemon of the DaemonSet stops serving,
removes estuary's conflist, binaries, kernel state and files from its node and
restores what estuary replaced, then answers on its Node; this command waits for
every answer. Pods still running lose their network. Delete estuary's objects
afterwards (the DaemonSet's daemons stay idle until then). Deleting the
DaemonSet alone never cleans a node. --withdraw takes a request back: the
daemons restart and install estuary again.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := o.newClient()
			if err != nil {
				return err
			}
			opts := uninstall.Options{Namespace: ns, DaemonSet: ds}
			if withdraw {
				if err := uninstall.Withdraw(cmd.Context(), k, opts); err != nil {
					return err
				}
				_, _ = fmt.Fprintf(o.streams.Out, "uninstall request withdrawn from DaemonSet %s/%s: the daemons restart and install estuary again\n", ns, ds)
				return nil
			}
			if !yes && !confirm(o.streams, fmt.Sprintf("Take estuary off every node of DaemonSet %s/%s (running pods lose their network)", ns, ds)) {
				return fmt.Errorf("uninstall: not confirmed")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			if code := uninstall.Run(ctx, k, opts, o.streams.Out, o.streams.Err); code != 0 {
				return fmt.Errorf("uninstall: not every node is clean (above)")
			}
			return nil
		},
	}
	c.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	c.Flags().BoolVar(&withdraw, "withdraw", false, "withdraw the uninstall request: the daemons restart and install estuary again")
	c.Flags().StringVar(&ns, "estuary-namespace", defaultDaemonNamespace, "namespace estuary is installed in")
	c.Flags().StringVar(&ds, "daemonset", "estuary-daemon", "name of estuary's DaemonSet")
	c.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for every node's answer")
	return c
}
