// Command policybench is the Go half of hack/bench-policy.sh: it loads a lab
// cluster with NetworkPolicies over simulated peer pods, removes them again,
// and times how long a pod's label change takes to be enforced.
//
//	policybench load   --kubeconfig F [--namespaces 100 --pods 100 --policies 10]
//	policybench unload --kubeconfig F
//	policybench flip   --kubeconfig F --namespace NS --pod P --netns PATH --target NAME=IP:PORT... [--flips 20]
//
// load creates a Node that no kubelet runs (spec.unschedulable, a NoSchedule
// taint, no kubernetes.io/os label, so no DaemonSet or scheduler places a pod
// there), and in each namespace pb-NNN pods bound to it whose status the
// program writes itself (phase Running, an address of --cidr): peers that
// exist for the API and for policy, without a container. Each namespace gets
// --policies NetworkPolicies over them. unload deletes all of it. flip is
// described in flip.go.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Labels that mark what load creates.
const (
	// LoadLabel is on every namespace, NetworkPolicy and the Node load
	// creates; unload deletes what carries it.
	LoadLabel = "policybench.estuary.io/load"
	// PeerLabel is on every simulated peer pod; unload deletes the pods
	// that carry it.
	PeerLabel = "policybench.estuary.io/peer"
	// WebhookOptOut keeps the estuary pod webhooks from being called for a
	// simulated peer.
	WebhookOptOut = "networking.estuary.io/webhook"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: policybench load|unload|flip [flags] (see the package documentation)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1], os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "policybench %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cmd string, args []string) error {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster")
	switch cmd {
	case "load":
		cfg := loadConfig{}
		fs.IntVar(&cfg.Namespaces, "namespaces", 100, "namespaces pb-000 ... (an existing one is labelled and used)")
		fs.IntVar(&cfg.Pods, "pods", 100, "simulated peer pods per namespace")
		fs.IntVar(&cfg.Policies, "policies", 10, "NetworkPolicies per namespace (at most 10)")
		fs.StringVar(&cfg.Node, "node", "peer-sim", "the Node the peers are bound to (created)")
		fs.StringVar(&cfg.CIDR, "cidr", "10.240.0.0/16", "the peers' addresses")
		fs.IntVar(&cfg.Workers, "workers", 16, "concurrent API writes")
		if err := fs.Parse(args); err != nil {
			return err
		}
		cs, err := clientset(*kubeconfig)
		if err != nil {
			return err
		}
		return load(ctx, cs, cfg)
	case "unload":
		node := fs.String("node", "peer-sim", "the Node load created")
		wait := fs.Bool("wait", true, "wait until the namespaces are gone")
		if err := fs.Parse(args); err != nil {
			return err
		}
		cs, err := clientset(*kubeconfig)
		if err != nil {
			return err
		}
		return unload(ctx, cs, *node, *wait)
	case "flip":
		cfg := flipConfig{}
		cfg.register(fs)
		if err := fs.Parse(args); err != nil {
			return err
		}
		cs, err := clientset(*kubeconfig)
		if err != nil {
			return err
		}
		return flip(ctx, cs, cfg, os.Stdout)
	default:
		return fmt.Errorf("unknown command %q: want load, unload or flip", cmd)
	}
}

// clientset builds a client of the cluster that is not throttled: the
// load's writes are what is measured against, not client-side limits.
func clientset(kubeconfig string) (*kubernetes.Clientset, error) {
	if kubeconfig == "" {
		return nil, errors.New("--kubeconfig is required")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("read kubeconfig %s: %w", kubeconfig, err)
	}
	rc.QPS, rc.Burst = 1000, 2000
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", kubeconfig, err)
	}
	return cs, nil
}
