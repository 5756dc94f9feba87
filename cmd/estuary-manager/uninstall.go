package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/uninstall"
)

// uninstallNodesCommand is the subcommand the chart's pre-delete hook runs.
const uninstallNodesCommand = "uninstall-nodes"

// uninstallNodesMain runs `estuary-manager uninstall-nodes`: it asks every
// daemon of the DaemonSet to take estuary off its node, waits for each
// answer and clears them, and returns the exit code (0 only when every
// node answered without error).
func uninstallNodesMain(args []string, out, errOut io.Writer) int {
	fs := flag.NewFlagSet(uninstallNodesCommand, flag.ContinueOnError)
	fs.SetOutput(errOut)
	ns := fs.String("namespace", os.Getenv("POD_NAMESPACE"), "namespace of the daemons' DaemonSet (default: $POD_NAMESPACE)")
	name := fs.String("daemonset", "estuary-daemon", "name of the daemons' DaemonSet")
	timeout := fs.Duration("timeout", 4*time.Minute, "how long to wait for every node's answer")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *ns == "" {
		_, _ = fmt.Fprintf(errOut, "usage: estuary-manager %s --namespace NS [--daemonset NAME] [--timeout D]\n", uninstallNodesCommand)
		return 2
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		_, _ = fmt.Fprintf(errOut, "estuary-manager %s: %v\n", uninstallNodesCommand, err)
		return 1
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		_, _ = fmt.Fprintf(errOut, "estuary-manager %s: %v\n", uninstallNodesCommand, err)
		return 1
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_, _ = fmt.Fprintf(errOut, "estuary-manager %s: %v\n", uninstallNodesCommand, err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	return uninstall.Run(ctx, c, uninstall.Options{Namespace: *ns, DaemonSet: *name}, out, errOut)
}
