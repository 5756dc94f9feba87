package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// ipsFlags select the records `get ips` lists.
type ipsFlags struct {
	all      bool
	selector string
	out      *output
}

func getIPsCmd(o *options) *cobra.Command {
	f := &ipsFlags{}
	c := &cobra.Command{
		Use:   "ips",
		Short: "The addresses recorded for the pods and workloads of a namespace (-A: of every namespace)",
		Long: "Lists the address records (IPInstances) whose pod or workload is in the namespace (-n, else the\n" +
			"context's), or in every namespace with -A, sorted by namespace, pod and address. -l filters by the\n" +
			"records' labels (networking.estuary.io/subnet, networking.estuary.io/node, networking.estuary.io/pod).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.out.validate("get ips"); err != nil {
				return err
			}
			sel, err := labels.Parse(f.selector)
			if err != nil {
				return fmt.Errorf("get ips: -l %q: %w", f.selector, err)
			}
			ns := ""
			if !f.all {
				ns = o.ns()
			}
			k, err := o.newClient()
			if err != nil {
				return err
			}
			return getIPs(cmd.Context(), k, o.streams, f.out, ns, sel)
		},
	}
	c.Flags().BoolVarP(&f.all, "all-namespaces", "A", false, "list the records of every namespace")
	c.Flags().StringVarP(&f.selector, "selector", "l", "", "label selector on the records (e.g. networking.estuary.io/subnet=overlay-v4)")
	f.out = addOutput(c)
	return c
}

// getIPs prints the records of namespace ns ("" for all) that sel selects.
func getIPs(ctx context.Context, k client.Client, s Streams, out *output, ns string, sel labels.Selector) error {
	if ns != "" {
		req, err := labels.NewRequirement(estuaryv1.LabelNamespace, "=", []string{ns})
		if err != nil {
			return fmt.Errorf("namespace %q: %w", ns, err)
		}
		sel = sel.Add(*req)
	}
	var list estuaryv1.IPInstanceList
	if err := k.List(ctx, &list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return fmt.Errorf("list ipinstances (%s): %w", sel, err)
	}
	slices.SortFunc(list.Items, func(a, b estuaryv1.IPInstance) int {
		x, y := a.Spec.Binding, b.Spec.Binding
		return strings.Compare(x.Namespace+"/"+x.PodName+"/"+a.Name, y.Namespace+"/"+y.PodName+"/"+b.Name)
	})
	table, wide := out.table()
	if !table {
		return out.object(s.Out, &list)
	}
	if len(list.Items) == 0 {
		where := "in namespace " + ns
		if ns == "" {
			where = "in any namespace"
		}
		return say(s.Err, "no address records %s", where)
	}
	return ipTable(s, list.Items, ns == "", wide)
}

// ipTable lays out records one per row; wide adds the network, the owner,
// the record's name and its retention.
func ipTable(s Streams, rows []estuaryv1.IPInstance, withNamespace, wide bool) error {
	t := newTable()
	cols := []string{"ADDRESS", "SUBNET", "POD", "NODE", "PHASE", "RESERVED", "EXPIRES", "SINCE"}
	if withNamespace {
		cols = append([]string{"NAMESPACE"}, cols...)
	}
	if wide {
		cols = append(cols, "NETWORK", "OWNER", "RECORD", "RETENTION")
	}
	t.row("%s\n", strings.Join(cols, "\t"))
	for i := range rows {
		ipi := &rows[i]
		b := ipi.Spec.Binding
		vals := []string{ipi.Spec.Address.IP, ipi.Spec.Subnet, orDash(b.PodName), orDash(b.NodeName), phaseOf(ipi),
			yesNo(ipi.Spec.Reserved), expiresAt(ipi), ipi.CreationTimestamp.UTC().Format(time.RFC3339)}
		if withNamespace {
			vals = append([]string{b.Namespace}, vals...)
		}
		if wide {
			vals = append(vals, ipi.Spec.Network, b.Owner.Kind+"/"+b.Owner.Name+ordinalNote(b.StatefulOrdinal), ipi.Name, retentionNote(ipi.Spec.Retention))
		}
		t.row("%s\n", strings.Join(vals, "\t"))
	}
	return t.writeTo(s.Out)
}
