package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/version"
)

// Labels the chart gives estuary's workloads (charts/estuary/_helpers.tpl).
const (
	partOfLabel  = "app.kubernetes.io/part-of"
	nameLabel    = "app.kubernetes.io/name"
	versionLabel = "app.kubernetes.io/version"
)

// estuaryWorkloads are the app.kubernetes.io/name of the manager Deployment
// and the daemon DaemonSet.
var estuaryWorkloads = []string{"estuary-manager", "estuary-daemon"}

// Component is one estuary workload found in the cluster.
type Component struct {
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Version   string   `json:"version"` // its app.kubernetes.io/version label: the chart's appVersion
	Images    []string `json:"images"`
}

// VersionReport is what `kubectl estuary version` prints.
type VersionReport struct {
	Client   version.Info `json:"client"`
	Server   []Component  `json:"server"`
	Warnings []string     `json:"warnings,omitempty"`
}

func versionCmd(o *options) *cobra.Command {
	var (
		output     string
		clientOnly bool
	)
	c := &cobra.Command{
		Use:   "version",
		Short: "The plugin's version and the version of estuary in the cluster; warns on stderr when they differ",
		Long: "Prints the plugin's version and, for each estuary manager Deployment and daemon DaemonSet (in the\n" +
			"namespace -n names, else in every namespace), the version the chart installed (its\n" +
			"app.kubernetes.io/version label) and its images. A minor version apart from the plugin's, or from\n" +
			"each other's, is warned about on stderr.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkReportFormat("version", output); err != nil {
				return err
			}
			r := VersionReport{Client: version.Get()}
			if !clientOnly {
				k, err := o.newClient()
				if err != nil {
					return err
				}
				if r.Server, err = serverComponents(cmd.Context(), k, *o.flags.Namespace); err != nil {
					return err
				}
				r.Warnings = skewWarnings(r.Client.Version, r.Server)
			}
			return printVersion(o.streams, r, output, clientOnly)
		},
	}
	c.Flags().StringVarP(&output, "output", "o", "text", reportFormats)
	c.Flags().BoolVar(&clientOnly, "client", false, "the plugin's version only, without asking the API server")
	return c
}

// serverComponents lists estuary's Deployments and DaemonSets in namespace
// (every namespace when empty), sorted by namespace and name.
func serverComponents(ctx context.Context, k client.Reader, namespace string) ([]Component, error) {
	sel := client.MatchingLabels{partOfLabel: "estuary"}
	opts := []client.ListOption{sel}
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	var out []Component
	var deps appsv1.DeploymentList
	if err := k.List(ctx, &deps, opts...); err != nil {
		return nil, fmt.Errorf("list estuary's Deployments (-n NAMESPACE looks in one namespace only): %w", err)
	}
	for _, d := range deps.Items {
		out = appendComponent(out, "Deployment", d.Namespace, d.Name, d.Labels, d.Spec.Template.Spec)
	}
	var dss appsv1.DaemonSetList
	if err := k.List(ctx, &dss, opts...); err != nil {
		return nil, fmt.Errorf("list estuary's DaemonSets (-n NAMESPACE looks in one namespace only): %w", err)
	}
	for _, d := range dss.Items {
		out = appendComponent(out, "DaemonSet", d.Namespace, d.Name, d.Labels, d.Spec.Template.Spec)
	}
	slices.SortFunc(out, func(a, b Component) int {
		return strings.Compare(a.Namespace+"/"+a.Kind+"/"+a.Name, b.Namespace+"/"+b.Kind+"/"+b.Name)
	})
	return out, nil
}

// appendComponent adds a workload that is the manager or the daemon.
func appendComponent(out []Component, kind, ns, name string, labels map[string]string, spec corev1.PodSpec) []Component {
	if !slices.Contains(estuaryWorkloads, labels[nameLabel]) {
		return out
	}
	c := Component{Kind: kind, Namespace: ns, Name: name, Version: labels[versionLabel]}
	for _, ctr := range spec.Containers {
		c.Images = append(c.Images, ctr.Image)
	}
	return append(out, c)
}

// skewWarnings says where the plugin and the cluster's components are a
// minor version apart, or no estuary was found.
func skewWarnings(client string, server []Component) []string {
	if len(server) == 0 {
		return []string{"no estuary manager or daemon found (looked for workloads labelled " + partOfLabel + "=estuary)"}
	}
	var w []string
	for _, c := range server {
		if s := version.Skew(client, c.Version); s != "" {
			w = append(w, fmt.Sprintf("kubectl-estuary %s and %s %s/%s %s: %s", client, c.Kind, c.Namespace, c.Name, orDash(c.Version), s))
		}
	}
	for _, c := range server[1:] {
		if c.Version != server[0].Version {
			w = append(w, fmt.Sprintf("%s %s/%s runs %s but %s %s/%s runs %s (an upgrade in progress?)",
				c.Kind, c.Namespace, c.Name, orDash(c.Version), server[0].Kind, server[0].Namespace, server[0].Name, orDash(server[0].Version)))
		}
	}
	return w
}

func printVersion(s Streams, r VersionReport, output string, clientOnly bool) error {
	for _, w := range r.Warnings {
		if err := say(s.Err, "warning: %s", w); err != nil {
			return err
		}
	}
	if output != "text" {
		return report(s.Out, output, r)
	}
	t := newTable()
	t.row("Client:\tkubectl-estuary %s\n", r.Client)
	if !clientOnly {
		if len(r.Server) == 0 {
			t.row("Server:\tnot found\n")
		}
		for _, c := range r.Server {
			t.row("Server:\t%s %s/%s %s\t%s\n", c.Kind, c.Namespace, c.Name, orDash(c.Version), strings.Join(c.Images, ","))
		}
	}
	return t.writeTo(s.Out)
}
