// Package cli is the kubectl plugin `kubectl estuary`: it shows who holds an
// address, the addresses of a namespace and what a workload holds, how full
// each subnet is, reserves addresses for a workload, releases an address an
// operator names, checks (and repairs) the agreement of the cluster's
// address records with its pods, Subnet counts and what each node's daemon
// plumbed, says whether estuary is healthy (status), collects a support
// archive (sysdump), probes every packet path with pods of its own
// (connectivity-test), shows the policies that select a pod and the rules
// its node enforces, and the packets the nodes' policies dropped (policy),
// writes estuary's objects for hybridnet's (migrate hybridnet, package
// migrate), takes estuary off every node on request (uninstall, package
// uninstall), and prints its own version beside the cluster's. It talks only
// to the API server, with the user's own credentials, read by kubectl's
// cli-runtime from every kubectl global flag (check, sysdump and policy
// reach the daemons through pods/exec), and never takes a lock: the
// cluster keeps serving pods while it runs.
package cli

import (
	"bytes"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/version"
)

// Streams are where a command reads confirmations and writes its output.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// options are the flags every command shares: kubectl's own global flags
// (--kubeconfig, --context, -n, --server, --token, --as, ...), read by
// cli-runtime exactly as kubectl reads them.
type options struct {
	streams Streams
	flags   *genericclioptions.ConfigFlags
	// newClient makes the API client; tests replace it.
	newClient func() (client.Client, error)
	// config is the API server's configuration newClient uses.
	config func() (*rest.Config, error)
}

// NewRoot returns the `kubectl estuary` command. newConfig, when not nil,
// replaces the kubeconfig lookup (tests pass their API server's).
func NewRoot(streams Streams, newConfig func() (*rest.Config, error)) *cobra.Command {
	o := &options{streams: streams}
	root := &cobra.Command{
		Use:           "kubectl-estuary",
		Short:         "See and repair estuary's pod addresses",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Version,
	}
	root.SetVersionTemplate(version.Line("kubectl-estuary") + "\n")
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.Err)
	o.flags = genericclioptions.NewConfigFlags(true)
	o.flags.AddFlags(root.PersistentFlags())
	registerCompletions(root, o)
	o.config = func() (*rest.Config, error) { return o.restConfig(newConfig) }
	o.newClient = func() (client.Client, error) {
		cfg, err := o.config()
		if err != nil {
			return nil, err
		}
		return newClient(cfg)
	}
	root.AddCommand(getCmd(o), subnetsCmd(o), reserveCmd(o), releaseCmd(o), checkCmd(o), repairCmd(o), versionCmd(o), connectivityCmd(o), sysdumpCmd(o), statusCmd(o), migrateCmd(o), policyCmd(o), uninstallCmd(o))
	return root
}

func (o *options) restConfig(newConfig func() (*rest.Config, error)) (*rest.Config, error) {
	if newConfig != nil {
		return newConfig()
	}
	cfg, err := o.flags.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}

// ns is the namespace flag, else the context's namespace, else default.
func (o *options) ns() string {
	if ns, _, err := o.flags.ToRawKubeConfigLoader().Namespace(); err == nil && ns != "" {
		return ns
	}
	return "default"
}

// cliScheme holds the types the plugin reads and prints.
var cliScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, estuaryv1.AddToScheme, npv1beta1.Install, npv1alpha1.Install} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("register the plugin's types: %v", err))
		}
	}
	return s
}()

func newClient(cfg *rest.Config) (client.Client, error) {
	c, err := client.New(cfg, client.Options{Scheme: cliScheme})
	if err != nil {
		return nil, fmt.Errorf("connect to the API server: %w", err)
	}
	return c, nil
}

// table lays out rows in aligned columns in memory (writes to it cannot
// fail) and writes them out in one call.
type table struct {
	buf bytes.Buffer
	tw  *tabwriter.Writer
}

func newTable() *table {
	t := &table{}
	t.tw = tabwriter.NewWriter(&t.buf, 0, 4, 2, ' ', 0)
	return t
}

func (t *table) row(format string, args ...any) { _, _ = fmt.Fprintf(t.tw, format, args...) }

func (t *table) writeTo(w io.Writer) error {
	if err := t.tw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(t.buf.Bytes())
	return err
}

// say writes one formatted line to w.
func say(w io.Writer, format string, args ...any) error {
	_, err := fmt.Fprintf(w, format+"\n", args...)
	return err
}
