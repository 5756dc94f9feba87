// Command estuary-lab runs the estuary lab: a multi-node Kubernetes cluster on one
// machine, inside network namespaces. The commands are thin wiring around
// test/infra/lab.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/estuary-cni/estuary/internal/version"
	"github.com/estuary-cni/estuary/test/infra/lab"
	"github.com/estuary-cni/estuary/test/infra/lab/netlab"
	"github.com/estuary-cni/estuary/test/infra/lab/nodens"
	"github.com/estuary-cni/estuary/test/infra/lab/proc"
)

func main() {
	if len(os.Args) > 1 {
		if err := internalCommand(os.Args[1], os.Args[2:]); !errors.Is(err, errNotInternal) {
			fmt.Fprintf(os.Stderr, "estuary-lab %s: %v\n", os.Args[1], err)
			os.Exit(1)
		}
	}
	if err := root().Execute(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			os.Exit(ee.ExitCode())
		}
		os.Exit(1)
	}
}

var errNotInternal = errors.New("not an internal command")

// internalCommand runs the helpers the lab starts itself with; they are not meant
// for people.
func internalCommand(name string, args []string) error {
	switch name {
	case proc.RunCommand:
		return proc.RunMain(args)
	case nodens.HolderCommand:
		return nodens.HolderMain(args)
	case netlab.ForwardCommand:
		if len(args) != 3 {
			return fmt.Errorf("usage: %s LISTEN NETNS-PATH TARGET", netlab.ForwardCommand)
		}
		return netlab.Forward(args[0], args[1], args[2])
	}
	return errNotInternal
}

func root() *cobra.Command {
	var opts lab.Options
	stateDir := os.Getenv("ESTUARY_LAB_STATE")
	if stateDir == "" {
		stateDir = lab.DefaultStateDir
	}
	c := &cobra.Command{
		Use:           "estuary-lab",
		Short:         "A multi-node Kubernetes lab inside network namespaces",
		SilenceUsage:  true,
		SilenceErrors: false,
		Version:       version.Version,
	}
	c.SetVersionTemplate(version.Line("estuary-lab") + "\n")
	c.PersistentFlags().StringVar(&opts.StateDir, "state-dir", stateDir, "lab state directory (env ESTUARY_LAB_STATE)")
	c.AddCommand(upCmd(&opts), downCmd(&opts), statusCmd(&opts), kubeconfigCmd(&opts), execCmd(&opts), imagesCmd(&opts), restartCmd(&opts),
		conformanceCmd(&opts))
	return c
}

func upCmd(opts *lab.Options) *cobra.Command {
	c := &cobra.Command{
		Use:   "up",
		Short: "Create the lab (removing any previous one at the same state directory)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Out = cmd.OutOrStdout()
			l, err := lab.New(*opts)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return l.Up(ctx)
		},
	}
	f := c.Flags()
	f.IntVar(&opts.Nodes, "nodes", 3, "number of worker nodes")
	f.StringVar(&opts.CNI, "cni", "bridge", "CNI to install: bridge (reference plugins), estuary, flannel (flanneld, VXLAN backend), or hybridnet (built from $HYBRIDNET_SRC, default ../shared/peers/hybridnet)")
	f.StringVar(&opts.Bootstrap, "bootstrap", lab.BootstrapLab, "how the cluster is made: lab (the lab's own control plane and node daemons) or kubeadm (kubeadm init and join on the nodes, estuary installed with docs/install.md's commands; --cni estuary, IPv4)")
	f.StringVar(&opts.KubernetesVersion, "kubernetes-version", lab.DefaultKubernetesVersion, "Kubernetes version to build and run")
	f.StringVar(&opts.ProxyMode, "proxy-mode", "iptables", "kube-proxy mode: iptables or nftables")
	f.StringVar(&opts.IPFamily, "ip-family", lab.FamilyIPv4, "IP families of the lab: ipv4, dual (IPv4 and IPv6) or ipv6 (IPv6 only)")
	f.BoolVar(&opts.Profiling, "profiling", false, "serve /debug/pprof on kube-apiserver (to its admin)")
	f.IntVar(&opts.ControlPlaneQPS, "control-plane-qps", 0, "API client rate of kube-controller-manager and kube-scheduler, burst twice that (0: their defaults, 20 and 50)")
	f.IntVar(&opts.HostAPIPort, "api-port", lab.DefaultHostAPIPort, "host loopback port forwarded to the API server")
	f.StringVar(&opts.CacheDir, "cache-dir", envOr("ESTUARY_CACHE", lab.DefaultCacheDir), "binary and image cache (env ESTUARY_CACHE)")
	f.StringVar(&opts.RepoDir, "repo", "", "estuary checkout (default: found from the working directory)")
	f.StringVar(&opts.BinDir, "bin-dir", os.Getenv("ESTUARY_LAB_BIN_DIR"), "prebuilt Kubernetes binaries (default: hack/kube-binaries.sh)")
	f.DurationVar(&opts.Timeout, "timeout", 10*time.Minute, "give up on the bring-up (after binaries are built) after this long")
	return c
}

func downCmd(opts *lab.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Remove everything the lab made (also after a crash or a killed up)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Out = cmd.OutOrStdout()
			l, err := lab.New(*opts)
			if err != nil {
				return err
			}
			return l.Down()
		},
	}
}

func restartCmd(opts *lab.Options) *cobra.Command {
	var timeout time.Duration
	c := &cobra.Command{
		Use:   "restart kube-apiserver",
		Short: "Kill a control-plane component with SIGKILL and start it again (fault tests)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[0] != "kube-apiserver" {
				return fmt.Errorf("restart: unknown component %q (known: kube-apiserver)", args[0])
			}
			opts.Out = cmd.OutOrStdout()
			l, err := lab.New(*opts)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return l.RestartAPIServer(ctx)
		},
	}
	c.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "give up when the component is not ready again after this long")
	return c
}

func statusCmd(opts *lab.Options) *cobra.Command {
	var output string
	c := &cobra.Command{
		Use:   "status",
		Short: "Show the lab's topology, nodes and components",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := lab.New(*opts)
			if err != nil {
				return err
			}
			s, err := l.Status(cmd.Context())
			if err != nil {
				return err
			}
			switch output {
			case "json":
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(s)
			case "", "table":
				return s.WriteTable(cmd.OutOrStdout())
			}
			return fmt.Errorf("--output %q: want table or json", output)
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	return c
}

func kubeconfigCmd(opts *lab.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print the path of the lab's admin kubeconfig",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			l, err := lab.New(*opts)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), l.KubeconfigPath())
			return err
		},
	}
}

func execCmd(opts *lab.Options) *cobra.Command {
	return &cobra.Command{
		Use:   "exec NODE -- CMD [ARG...]",
		Short: "Run a command inside a lab machine (node-N, control-plane, router, external, switch)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := lab.New(*opts)
			if err != nil {
				return err
			}
			c, err := l.Command(args[0], args[1:])
			if err != nil {
				return err
			}
			cmd.SilenceErrors = true
			return c.Run()
		},
	}
}

func imagesCmd(opts *lab.Options) *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "images --out DIR",
		Short: "Build the estuary-manager and estuary-daemon images as docker-archive tarballs into DIR",
		Long: "Builds static estuary-manager, estuary-daemon and estuary-cni binaries and the reference loopback and\n" +
			"portmap plugins, packs them into estuary.local/estuary-manager:<hash> and estuary.local/estuary-daemon:<hash>\n" +
			"(<hash> changes with their content) and writes DIR/estuary-manager.tar, DIR/estuary-daemon.tar (for\n" +
			"`ctr -n k8s.io images import`) and DIR/values-images.yaml (for `helm install -f`).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out: required")
			}
			l, err := lab.New(*opts)
			if err != nil {
				return err
			}
			img, err := l.ExportImages(out)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\n%s\t%s\n%s\n", img.Manager.Tag, filepath.Join(out, "estuary-manager.tar"),
				img.Daemon.Tag, filepath.Join(out, "estuary-daemon.tar"), filepath.Join(out, "values-images.yaml"))
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&out, "out", "", "directory to write the archives into")
	f.StringVar(&opts.CacheDir, "cache-dir", envOr("ESTUARY_CACHE", lab.DefaultCacheDir), "binary and image cache (env ESTUARY_CACHE)")
	f.StringVar(&opts.RepoDir, "repo", "", "estuary checkout (default: found from the working directory)")
	return c
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
