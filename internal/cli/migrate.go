package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/estuary-cni/estuary/internal/migrate"
)

func migrateCmd(o *options) *cobra.Command {
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Carry another CNI's networks and pod addresses over to estuary",
	}
	c.AddCommand(migrateHybridnetCmd(o))
	return c
}

// migrateOptions are the flags of migrate hybridnet.
type migrateOptions struct {
	files           []string
	dryRun          bool
	secretNamespace string
	retainTTL       time.Duration
}

func migrateHybridnetCmd(o *options) *cobra.Command {
	mo := &migrateOptions{}
	c := &cobra.Command{
		Use:   "hybridnet [-f FILE]... [--dry-run]",
		Short: "Write estuary's Networks, Subnets and address records for hybridnet's (networking.alibaba.com/v1)",
		Long: `hybridnet reads hybridnet's Networks, Subnets and IPInstances, from the cluster
or from files (-f: YAML or JSON, several documents, lists as kubectl get -o yaml
prints them; "-" reads standard input), and writes the estuary objects that mean
the same: Networks (type, mode, netID, nodeSelector, BGP peers), Subnets (range,
reserved and excluded addresses, natOutgoing, private), a Secret per BGP network
holding its peers' passwords, and an IPInstance for every address hybridnet holds
for a workload, kept for that workload so that its pods, re-created during the
switch, get their addresses back (docs/migrate-from-hybridnet.md).

--dry-run prints the objects as YAML and writes nothing; with -f it does not
contact the cluster at all, and against the cluster it needs no estuary CRDs. Otherwise each object is created if it does not
exist; one that exists is left as it is, and reported when it differs. A second
run changes nothing. Whatever estuary cannot express is listed under "not
migrated" with the object, the field and why, and the command then exits
non-zero.

With -f, the addresses of pods other than a StatefulSet's need the pods (and
their ReplicaSets, Deployments, Jobs and CronJobs) in the files too, to know
their workloads.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if mo.retainTTL <= 0 {
				return fmt.Errorf("migrate hybridnet: --retain-ttl must be positive, not %s", mo.retainTTL)
			}
			return migrateHybridnet(cmd.Context(), o, mo)
		},
	}
	c.Flags().StringArrayVarP(&mo.files, "filename", "f", nil, "read hybridnet's objects from this file (repeatable; - for standard input) instead of the cluster")
	c.Flags().BoolVar(&mo.dryRun, "dry-run", false, "print the estuary objects as YAML, write nothing")
	c.Flags().StringVar(&mo.secretNamespace, "secret-namespace", "kube-system", "namespace of the Secrets holding BGP passwords (estuary's release namespace)")
	c.Flags().DurationVar(&mo.retainTTL, "retain-ttl", 24*time.Hour,
		"how long the address of a pod of any workload but a StatefulSet stays kept for its workload once the pod goes")
	return c
}

func migrateHybridnet(ctx context.Context, o *options, mo *migrateOptions) error {
	in, err := migrateInput(ctx, o, mo)
	if err != nil {
		return fmt.Errorf("migrate hybridnet: %w", err)
	}
	res := migrate.Translate(in)
	if mo.dryRun {
		if err := migratePrint(o.streams.Out, &res); err != nil {
			return err
		}
		if err := res.Report.WriteComments(o.streams.Out, "# "); err != nil {
			return err
		}
		return migrateOutcome(&res, 0)
	}
	k, err := o.newClient()
	if err != nil {
		return err
	}
	w := &migrateWriter{k: k, out: o.streams.Out}
	failed := w.writeAll(ctx, &res)
	if err := say(o.streams.Out, "%s", w.summary()); err != nil {
		return err
	}
	if err := res.Report.WriteComments(o.streams.Out, ""); err != nil {
		return err
	}
	return migrateOutcome(&res, failed)
}

// migrateOutcome is the command's error: objects that could not be written
// or that exist and differ (failed), and anything not migrated.
func migrateOutcome(res *migrate.Result, failed int) error {
	switch n := len(res.Report.NotMigrated); {
	case failed > 0 && n > 0:
		return fmt.Errorf("migrate hybridnet: %d object(s) not written or differing, %d item(s) not migrated (listed above)", failed, n)
	case failed > 0:
		return fmt.Errorf("migrate hybridnet: %d object(s) not written or differing (listed above)", failed)
	case n > 0:
		return fmt.Errorf("migrate hybridnet: %d item(s) not migrated (listed above)", n)
	}
	return nil
}

// migratePrint writes the objects of res as a YAML stream, in the order
// they are written.
func migratePrint(w io.Writer, res *migrate.Result) error {
	var objs []runtime.Object
	for _, s := range res.Secrets {
		objs = append(objs, s)
	}
	for _, n := range res.Networks {
		objs = append(objs, n)
	}
	for _, s := range res.Subnets {
		objs = append(objs, s)
	}
	for _, ipi := range res.IPInstances {
		objs = append(objs, ipi)
	}
	for _, obj := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return fmt.Errorf("print %T: %w", obj, err)
		}
		if meta, ok := m["metadata"].(map[string]any); ok {
			delete(meta, "creationTimestamp")
		}
		if st, ok := m["status"].(map[string]any); ok && len(st) == 0 {
			delete(m, "status")
		}
		b, err := yaml.Marshal(m)
		if err != nil {
			return fmt.Errorf("print %T: %w", obj, err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", b); err != nil {
			return err
		}
	}
	return nil
}
