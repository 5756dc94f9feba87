package cli

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func getCmd(o *options) *cobra.Command {
	c := &cobra.Command{Use: "get", Short: "Show who holds an address, or what a workload holds"}
	c.AddCommand(&cobra.Command{
		Use:   "ip ADDRESS",
		Short: "Who holds an address: pod, owner, node, phase, since when",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := netip.ParseAddr(args[0])
			if err != nil {
				return fmt.Errorf("get ip: %q is not an IP address", args[0])
			}
			k, err := o.newClient()
			if err != nil {
				return err
			}
			return getIP(cmd.Context(), k, o.streams, a)
		},
	})
	c.AddCommand(&cobra.Command{
		Use:   "workload KIND/NAME",
		Short: "The addresses a workload's pods hold and its owner keeps (StatefulSet, Deployment, ReplicaSet, DaemonSet, Job, Pod)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name, ok := strings.Cut(args[0], "/")
			if !ok || kind == "" || name == "" {
				return fmt.Errorf("get workload: %q is not KIND/NAME (e.g. statefulset/web)", args[0])
			}
			k, err := o.newClient()
			if err != nil {
				return err
			}
			return getWorkload(cmd.Context(), k, o.streams, o.ns(), canonicalKind(kind), name)
		},
	})
	return c
}

// getIP prints the record of one address, read by its name.
func getIP(ctx context.Context, k client.Client, s Streams, a netip.Addr) error {
	ipi := &estuaryv1.IPInstance{}
	err := k.Get(ctx, client.ObjectKey{Name: estuaryv1.InstanceName(a)}, ipi)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("address %s is not recorded: no ipinstance %s; it is free or outside every subnet", a, estuaryv1.InstanceName(a))
	}
	if err != nil {
		return fmt.Errorf("get ipinstance %s: %w", estuaryv1.InstanceName(a), err)
	}
	b := ipi.Spec.Binding
	t := newTable()
	row := func(k, v string) { t.row("%s:\t%s\n", k, v) }
	row("Address", ipi.Spec.Address.IP)
	row("Record", "ipinstance "+ipi.Name)
	row("Network/Subnet", ipi.Spec.Network+"/"+ipi.Spec.Subnet)
	row("Phase", string(ipi.Status.Phase))
	row("Pod", b.Namespace+"/"+b.PodName+uidNote(b.PodUID))
	row("Owner", fmt.Sprintf("%s %s/%s%s", b.Owner.Kind, b.Namespace, b.Owner.Name, ordinalNote(b.StatefulOrdinal)))
	row("Node", orDash(b.NodeName))
	row("Since", since(ipi.CreationTimestamp))
	row("Held", heldNote(ipi))
	return t.writeTo(s.Out)
}

// heldNote says how long the address stays with its holder.
func heldNote(ipi *estuaryv1.IPInstance) string {
	if ipi.Status.Phase == estuaryv1.IPInstanceRetained {
		return fmt.Sprintf("for the next pod %s of %s %s, while it keeps that ordinal", ipi.Spec.Binding.PodName, ipi.Spec.Binding.Owner.Kind, ipi.Spec.Binding.Owner.Name)
	}
	return "while pod " + ipi.Spec.Binding.PodName + " exists"
}

func uidNote(uid string) string {
	if uid == "" {
		return " (no pod now)"
	}
	return " (uid " + uid + ")"
}

func ordinalNote(o *int32) string {
	if o == nil {
		return ""
	}
	return fmt.Sprintf(" (ordinal %d)", *o)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func since(t metav1.Time) string {
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), time.Since(t.Time).Round(time.Second))
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
	case "po", "pod", "pods":
		return "Pod"
	}
	return kind
}

// getWorkload prints every record of the namespace that the workload's pods
// hold, or that the workload itself keeps (a StatefulSet's retained ones).
func getWorkload(ctx context.Context, k client.Client, s Streams, ns, kind, name string) error {
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
		if pods[b.PodName] || (b.Owner.Kind == kind && b.Owner.Name == name) {
			rows = append(rows, ipi)
		}
	}
	if len(rows) == 0 {
		return fmt.Errorf("%s %s/%s holds no address (%d pods found)", kind, ns, name, len(pods))
	}
	slices.SortFunc(rows, func(a, b estuaryv1.IPInstance) int {
		return strings.Compare(a.Spec.Binding.PodName+a.Name, b.Spec.Binding.PodName+b.Name)
	})
	t := newTable()
	t.row("ADDRESS\tSUBNET\tPOD\tNODE\tPHASE\tSINCE\n")
	for _, ipi := range rows {
		b := ipi.Spec.Binding
		t.row("%s\t%s\t%s\t%s\t%s\t%s\n", ipi.Spec.Address.IP, ipi.Spec.Subnet, b.PodName, orDash(b.NodeName), ipi.Status.Phase,
			ipi.CreationTimestamp.UTC().Format(time.RFC3339))
	}
	return t.writeTo(s.Out)
}

// workloadPods names the pods of ns whose top-level owner is kind/name
// (a Deployment's pods through their ReplicaSet).
func workloadPods(ctx context.Context, k client.Client, ns, kind, name string) (map[string]bool, error) {
	var pods corev1.PodList
	if err := k.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("list pods of namespace %s: %w", ns, err)
	}
	rsOwner := map[string]string{} // ReplicaSet -> its Deployment, read once each
	out := map[string]bool{}
	for _, p := range pods.Items {
		okind, oname := "Pod", p.Name
		if ref := metav1.GetControllerOf(&p); ref != nil {
			okind, oname = ref.Kind, ref.Name
		}
		if okind == "ReplicaSet" && kind == "Deployment" {
			d, seen := rsOwner[oname]
			if !seen {
				d = replicaSetOwner(ctx, k, ns, oname)
				rsOwner[oname] = d
			}
			if d != "" {
				okind, oname = "Deployment", d
			}
		}
		if okind == kind && oname == name {
			out[p.Name] = true
		}
	}
	return out, nil
}

var appsReplicaSet = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "ReplicaSet"}

func replicaSetOwner(ctx context.Context, k client.Client, ns, rs string) string {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(appsReplicaSet)
	if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: rs}, obj); err != nil {
		return ""
	}
	if ref := metav1.GetControllerOf(obj); ref != nil && ref.Kind == "Deployment" {
		return ref.Name
	}
	return ""
}
