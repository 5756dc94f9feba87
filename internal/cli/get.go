package cli

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func getCmd(o *options) *cobra.Command {
	c := &cobra.Command{Use: "get", Short: "Show who holds an address, the addresses of a namespace, or what a workload holds"}
	c.AddCommand(getIPCmd(o), getIPsCmd(o), workloadCmd(o))
	return c
}

func getIPCmd(o *options) *cobra.Command {
	var out *output
	var history bool
	var at string
	c := &cobra.Command{
		Use:   "ip ADDRESS",
		Short: "Who holds an address: pod, owner, node, phase, since when, until when",
		Long: "Shows the record of an address. --history lists every recorded move of the address (allocated,\n" +
			"handed over, kept, released), newest first; --at TIME (RFC 3339) says who held it at that instant.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := netip.ParseAddr(args[0])
			if err != nil {
				return fmt.Errorf("get ip: %q is not an IP address", args[0])
			}
			if at != "" {
				return runIPAt(cmd.Context(), o, out, a, at, history)
			}
			if err := out.validate("get ip"); err != nil {
				return err
			}
			k, err := o.newClient()
			if err != nil {
				return err
			}
			if history {
				return getIPHistory(cmd.Context(), k, o.streams, out, a)
			}
			return getIP(cmd.Context(), k, o.streams, out, a)
		},
	}
	out = addOutput(c)
	c.Flags().BoolVar(&history, "history", false, "list every recorded move of the address, newest first")
	c.Flags().StringVar(&at, "at", "", "say who held the address at this RFC 3339 time, or that it was free")
	return c
}

// getIP prints the record of one address, read by its name.
func getIP(ctx context.Context, k client.Client, s Streams, out *output, a netip.Addr) error {
	ipi := &estuaryv1.IPInstance{}
	err := k.Get(ctx, client.ObjectKey{Name: estuaryv1.InstanceName(a)}, ipi)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("address %s is not recorded: no ipinstance %s; it is free or outside every subnet", a, estuaryv1.InstanceName(a))
	}
	if err != nil {
		return fmt.Errorf("get ipinstance %s: %w", estuaryv1.InstanceName(a), err)
	}
	if table, _ := out.table(); !table {
		return out.object(s.Out, ipi)
	}
	b := ipi.Spec.Binding
	t := newTable()
	row := func(k, v string) { t.row("%s:\t%s\n", k, v) }
	row("Address", ipi.Spec.Address.IP)
	row("Record", "ipinstance "+ipi.Name)
	row("Network/Subnet", ipi.Spec.Network+"/"+ipi.Spec.Subnet)
	row("Phase", phaseOf(ipi))
	row("Pod", podNote(b))
	row("Owner", fmt.Sprintf("%s %s/%s%s", b.Owner.Kind, b.Namespace, b.Owner.Name, ordinalNote(b.StatefulOrdinal)))
	row("Node", orDash(b.NodeName))
	row("Reserved", yesNo(ipi.Spec.Reserved))
	row("Retention", retentionNote(ipi.Spec.Retention))
	row("Since", since(ipi.CreationTimestamp))
	row("Expires", expiresNote(ipi))
	row("Held", heldNote(ipi))
	return t.writeTo(s.Out)
}

// heldNote says whom the address is held for and how long.
func heldNote(ipi *estuaryv1.IPInstance) string {
	b := ipi.Spec.Binding
	owner := ownerName(ipi)
	switch ipi.Status.Phase {
	case estuaryv1.IPInstanceReserved:
		return "reserved for the next pod of " + owner + ", until released by hand"
	case estuaryv1.IPInstanceRetained:
		next := "for the next pod of " + owner
		if b.Owner.Kind == "StatefulSet" {
			next = fmt.Sprintf("for the next pod %s of %s, while it keeps that ordinal", b.PodName, owner)
		}
		if exp := ipi.Status.ExpiresAt; exp != nil {
			return next + ", until " + exp.UTC().Format(time.RFC3339)
		}
		return next
	}
	held := "while pod " + b.PodName + " exists"
	switch {
	case ipi.Spec.Reserved:
		return held + ", then reserved for " + owner + " again"
	case ipi.Spec.Retention != nil:
		return held + ", then retained for " + owner
	}
	return held
}

// holder names who holds a record's address, for messages.
func holder(ipi *estuaryv1.IPInstance) string {
	b := ipi.Spec.Binding
	s := fmt.Sprintf("ipinstance %s, %s, owner %s", ipi.Name, phaseOf(ipi), ownerName(ipi))
	if b.PodName != "" {
		s += ", pod " + podNote(b)
	}
	if b.NodeName != "" {
		s += ", node " + b.NodeName
	}
	if ipi.Spec.Reserved {
		s += ", reserved"
	}
	return s
}

func ownerName(ipi *estuaryv1.IPInstance) string {
	b := ipi.Spec.Binding
	return fmt.Sprintf("%s %s/%s", b.Owner.Kind, b.Namespace, b.Owner.Name)
}

func phaseOf(ipi *estuaryv1.IPInstance) string {
	if ipi.Status.Phase == "" {
		return "no phase"
	}
	return string(ipi.Status.Phase)
}

func podNote(b estuaryv1.Binding) string {
	if b.PodName == "" {
		return "none yet"
	}
	return b.Namespace + "/" + b.PodName + uidNote(b.PodUID)
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

func retentionNote(r *estuaryv1.Retention) string {
	switch {
	case r == nil:
		return "none"
	case r.TTL == nil:
		return "kept without time limit (Never)"
	}
	return "ttl " + r.TTL.Duration.String()
}

// expiresAt is when a record expires, for a table column: its
// status.expiresAt, "never" for a Retained or Reserved record without one,
// "-" for a Bound one (it goes with its pod).
func expiresAt(ipi *estuaryv1.IPInstance) string {
	if exp := ipi.Status.ExpiresAt; exp != nil {
		return exp.UTC().Format(time.RFC3339)
	}
	if ipi.Status.Phase == estuaryv1.IPInstanceRetained || ipi.Status.Phase == estuaryv1.IPInstanceReserved {
		return "never"
	}
	return "-"
}

// expiresNote is expiresAt with how far away that is.
func expiresNote(ipi *estuaryv1.IPInstance) string {
	exp := ipi.Status.ExpiresAt
	if exp == nil {
		return expiresAt(ipi)
	}
	d := time.Until(exp.Time).Round(time.Second)
	if d < 0 {
		return fmt.Sprintf("%s (%s ago)", expiresAt(ipi), -d)
	}
	return fmt.Sprintf("%s (in %s)", expiresAt(ipi), d)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
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
