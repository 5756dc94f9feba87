package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func workloadCmd(o *options) *cobra.Command {
	var out *output
	c := &cobra.Command{
		Use:   "workload KIND/NAME",
		Short: "The addresses a workload's pods hold and the workload keeps: retained and reserved ones too (StatefulSet, Deployment, ReplicaSet, DaemonSet, Job, CronJob, Pod)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, err := parseWorkload(args[0])
			if err != nil {
				return fmt.Errorf("get workload: %w", err)
			}
			if err := out.validate("get workload"); err != nil {
				return err
			}
			k, err := o.newClient()
			if err != nil {
				return err
			}
			return getWorkload(cmd.Context(), k, o.streams, out, o.ns(), kind, name)
		},
	}
	out = addOutput(c)
	return c
}

// parseWorkload splits KIND/NAME and makes the kind canonical.
func parseWorkload(s string) (kind, name string, err error) {
	kind, name, ok := strings.Cut(s, "/")
	if !ok || kind == "" || name == "" {
		return "", "", fmt.Errorf("%q is not KIND/NAME (e.g. statefulset/web)", s)
	}
	return canonicalKind(kind), name, nil
}

func canonicalKind(kind string) string {
	switch strings.ToLower(kind) {
	case "sts", "statefulset", "statefulsets":
		return "StatefulSet"
	case "deploy", "deployment", "deployments":
		return "Deployment"
	case "rs", "replicaset", "replicasets":
		return "ReplicaSet"
	case "ds", "daemonset", "daemonsets":
		return "DaemonSet"
	case "job", "jobs":
		return "Job"
	case "cj", "cronjob", "cronjobs":
		return "CronJob"
	case "po", "pod", "pods":
		return "Pod"
	}
	return kind
}

// ownerKinds are the API types of the owners the manager records.
var ownerKinds = map[string]schema.GroupVersionKind{
	"StatefulSet": {Group: "apps", Version: "v1", Kind: "StatefulSet"},
	"Deployment":  {Group: "apps", Version: "v1", Kind: "Deployment"},
	"ReplicaSet":  {Group: "apps", Version: "v1", Kind: "ReplicaSet"},
	"DaemonSet":   {Group: "apps", Version: "v1", Kind: "DaemonSet"},
	"Job":         {Group: "batch", Version: "v1", Kind: "Job"},
	"CronJob":     {Group: "batch", Version: "v1", Kind: "CronJob"},
	"Pod":         {Version: "v1", Kind: "Pod"},
}

// parentKind is the kind that may control a pod's controller in turn and
// is then the pod's top-level owner: a ReplicaSet's Deployment, a Job's
// CronJob.
var parentKind = map[string]string{"ReplicaSet": "Deployment", "Job": "CronJob"}

// getWorkload prints every record of the namespace that the workload's pods
// hold or that names the workload as its owner: Bound, Retained and
// Reserved ones.
func getWorkload(ctx context.Context, k client.Client, s Streams, out *output, ns, kind, name string) error {
	pods, err := workloadPods(ctx, k, ns, kind, name)
	if err != nil {
		return err
	}
	var list estuaryv1.IPInstanceList
	if err := k.List(ctx, &list, client.MatchingLabels{estuaryv1.LabelNamespace: ns}); err != nil {
		return fmt.Errorf("list ipinstances of namespace %s: %w", ns, err)
	}
	var rows []estuaryv1.IPInstance
	for _, ipi := range list.Items {
		b := ipi.Spec.Binding
		if b.Namespace != ns {
			continue
		}
		if (b.PodName != "" && pods[b.PodName]) || (b.Owner.Kind == kind && b.Owner.Name == name) {
			rows = append(rows, ipi)
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("%s %s/%s holds no address (%d pods found)", kind, ns, name, len(pods))
	}
	slices.SortFunc(rows, func(a, b estuaryv1.IPInstance) int {
		return strings.Compare(a.Spec.Binding.PodName+"/"+a.Name, b.Spec.Binding.PodName+"/"+b.Name)
	})
	if table, wide := out.table(); table {
		return ipTable(s, rows, false, wide)
	}
	return out.object(s.Out, &estuaryv1.IPInstanceList{Items: rows})
}

// workloadPods names the pods of ns whose top-level owner is kind/name (a
// Deployment's pods through their ReplicaSet, a CronJob's through its Job).
func workloadPods(ctx context.Context, k client.Client, ns, kind, name string) (map[string]bool, error) {
	var pods corev1.PodList
	if err := k.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list pods of namespace %s: %w", ns, err)
	}
	parents := map[string]string{} // "Kind/name" of a controller -> its parent's name, read once each
	out := map[string]bool{}
	for _, p := range pods.Items {
		okind, oname := "Pod", p.Name
		if ref := metav1.GetControllerOf(&p); ref != nil {
			okind, oname = ref.Kind, ref.Name
		}
		if parentKind[okind] == kind {
			key := okind + "/" + oname
			parent, seen := parents[key]
			if !seen {
				var err error
				if parent, err = controllerOf(ctx, k, ns, okind, oname, kind); err != nil {
					return nil, err
				}
				parents[key] = parent
			}
			if parent != "" {
				okind, oname = kind, parent
			}
		}
		if okind == kind && oname == name {
			out[p.Name] = true
		}
	}
	return out, nil
}

// controllerOf is the name of the controller of kind parent that controls
// the object kind/name of ns, or "" when there is none, the object is gone
// or the caller may not read it.
func controllerOf(ctx context.Context, k client.Client, ns, kind, name, parent string) (string, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(ownerKinds[kind])
	err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		// The records that name the workload as their owner are found
		// without it.
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get %s %s/%s: %w", strings.ToLower(kind), ns, name, err)
	}
	if ref := metav1.GetControllerOf(obj); ref != nil && ref.Kind == parent {
		return ref.Name, nil
	}
	return "", nil
}
