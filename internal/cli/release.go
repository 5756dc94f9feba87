package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func releaseCmd(o *options) *cobra.Command {
	var yes bool
	c := &cobra.Command{
		Use:   "release ADDRESS",
		Short: "Release an address no running pod uses: Bound, Retained or Reserved (asks first unless --yes)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := netip.ParseAddr(args[0])
			if err != nil {
				return fmt.Errorf("release: %q is not an IP address", args[0])
			}
			k, err := o.newClient()
			if err != nil {
				return err
			}
			return release(cmd.Context(), k, o.streams, a, yes)
		},
	}
	c.Flags().BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return c
}

// release deletes the record of a, Bound, Retained or Reserved, unless a
// running pod uses it. The delete is conditional on the record being the
// one that was read, so a record that changed hands meanwhile is left
// alone. The manager sees the record go and frees the address.
func release(ctx context.Context, k client.Client, s Streams, a netip.Addr, yes bool) error {
	ipi := &estuaryv1.IPInstance{}
	name := estuaryv1.InstanceName(a)
	if err := k.Get(ctx, client.ObjectKey{Name: name}, ipi); apierrors.IsNotFound(err) {
		return fmt.Errorf("release %s: not recorded (no ipinstance %s); nothing to release", a, name)
	} else if err != nil {
		return fmt.Errorf("release %s: get ipinstance %s: %w", a, name, err)
	}
	pod, err := podOfRecord(ctx, k, ipi)
	if err != nil {
		return fmt.Errorf("release %s: %w", a, err)
	}
	if why := usedBy(ipi, pod); why != "" {
		return fmt.Errorf("release %s: refused: %s", a, why)
	}
	desc := fmt.Sprintf("%s (%s)", ipi.Spec.Address.IP, holder(ipi))
	if !yes && !confirm(s, "release "+desc+releaseNote(ipi)) {
		return errors.New("release: not confirmed; nothing changed")
	}
	if err := deleteRecord(ctx, k, ipi); err != nil {
		return fmt.Errorf("release %s: %w", a, err)
	}
	return say(s.Out, "released %s", desc)
}

// releaseNote says what a release ends besides the record.
func releaseNote(ipi *estuaryv1.IPInstance) string {
	switch {
	case ipi.Status.Phase == estuaryv1.IPInstanceReserved || ipi.Spec.Reserved:
		return "; this ends the reservation for " + ownerName(ipi)
	case ipi.Status.Phase == estuaryv1.IPInstanceRetained:
		return "; the next pod of " + ownerName(ipi) + " gets another address"
	}
	return ""
}

// deleteRecord deletes ipi only if it is still the object that was read.
func deleteRecord(ctx context.Context, k client.Client, ipi *estuaryv1.IPInstance) error {
	uid, rv := ipi.UID, ipi.ResourceVersion
	err := k.Delete(ctx, ipi, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("ipinstance %s is already gone", ipi.Name)
	case apierrors.IsConflict(err):
		return fmt.Errorf("ipinstance %s changed since it was read; read it again", ipi.Name)
	case err != nil:
		return fmt.Errorf("delete ipinstance %s: %w", ipi.Name, err)
	}
	return nil
}

// podOfRecord reads the pod a record's binding names; nil when it names
// none (a reservation no pod used yet) or the pod does not exist.
func podOfRecord(ctx context.Context, k client.Client, ipi *estuaryv1.IPInstance) (*corev1.Pod, error) {
	b := ipi.Spec.Binding
	if b.PodName == "" {
		return nil, nil
	}
	pod := &corev1.Pod{}
	err := k.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.PodName}, pod)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s of ipinstance %s (spec.binding.podName): %w", b.Namespace, b.PodName, ipi.Name, err)
	}
	return pod, nil
}

// usedBy says which running pod uses a record's address, or "": the pod
// its binding names, when that pod is not finished and is the pod of the
// record's podUID (any pod of that name when the record has none: the
// next pod of a StatefulSet takes its retained address).
func usedBy(ipi *estuaryv1.IPInstance, pod *corev1.Pod) string {
	if pod == nil {
		return ""
	}
	b := ipi.Spec.Binding
	finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if (b.PodUID == "" || pod.UID == types.UID(b.PodUID)) && !finished {
		return fmt.Sprintf("pod %s/%s (uid %s, %s) uses it; delete the pod to release its address", b.Namespace, b.PodName, pod.UID, pod.Status.Phase)
	}
	return ""
}

// keptFor says why a Bound record whose pod is gone is still wanted, for
// repair, which releases leaks only: it is an administrator's reservation,
// its owner retains it (the manager turns it Retained), or the StatefulSet
// that had the pod still exists.
func keptFor(ctx context.Context, k client.Client, ipi *estuaryv1.IPInstance) (string, error) {
	b := ipi.Spec.Binding
	switch {
	case ipi.Spec.Reserved:
		return fmt.Sprintf("reserved for %s (spec.reserved); release it by hand if it should go", ownerName(ipi)), nil
	case ipi.Spec.Retention != nil:
		return fmt.Sprintf("retained for %s when its pod goes (spec.retention); the manager turns it Retained", ownerName(ipi)), nil
	case b.Owner.Kind != "StatefulSet":
		return "", nil
	}
	sts := &appsv1.StatefulSet{}
	err := k.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Owner.Name}, sts)
	if err == nil && sts.DeletionTimestamp == nil {
		return fmt.Sprintf("held for StatefulSet %s/%s (pod %s), which still exists; scale it below that ordinal, delete it, or set %s=false on its pod template",
			b.Namespace, b.Owner.Name, b.PodName, estuaryv1.AnnotationIPRetain), nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("get statefulset %s/%s of ipinstance %s (spec.binding.owner): %w", b.Namespace, b.Owner.Name, ipi.Name, err)
	}
	return "", nil
}

// confirm asks a yes/no question on stderr (stdout stays the command's
// output) and reads the answer; only "y" or "yes" agrees.
func confirm(s Streams, question string) bool {
	if _, err := fmt.Fprintf(s.Err, "%s? [y/N] ", question); err != nil {
		return false
	}
	line, _ := bufio.NewReader(s.In).ReadString('\n')
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes"
}
