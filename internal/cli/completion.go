package cli

import (
	"context"
	"slices"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// registerCompletions completes the global flags' values from the
// kubeconfig and the cluster, as kubectl does. Cobra's own `completion`
// command writes the shell script; kubectl completes `kubectl estuary ...`
// through a `kubectl_complete-estuary` executable on the PATH that runs
// `kubectl-estuary __complete "$@"` (docs/install.md).
func registerCompletions(root *cobra.Command, o *options) {
	_ = root.RegisterFlagCompletionFunc("namespace", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		return o.completeList(cmd.Context(), &corev1.NamespaceList{}, func(l client.ObjectList) []string {
			var out []string
			for _, n := range l.(*corev1.NamespaceList).Items {
				out = append(out, n.Name)
			}
			return out
		})
	})
	_ = root.RegisterFlagCompletionFunc("context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		raw, err := o.flags.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for name := range raw.Contexts {
			out = append(out, name)
		}
		slices.Sort(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	})
}

// completeList lists objects for a completion, giving up quietly after a
// few seconds: a shell must not hang on an unreachable cluster.
func (o *options) completeList(ctx context.Context, list client.ObjectList, names func(client.ObjectList) []string) ([]string, cobra.ShellCompDirective) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	k, err := o.newClient()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	if err := k.List(ctx, list); err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return names(list), cobra.ShellCompDirectiveNoFileComp
}
