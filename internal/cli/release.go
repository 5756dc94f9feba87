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
		Short: "Release an address no running pod uses (asks first unless --yes)",
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

// release deletes the record of a, unless a pod or a StatefulSet still
// wants it. The delete is conditional on the record being the one that was
// read, so a record that changed hands meanwhile is left alone. The manager
// sees the record go and frees the address.
func release(ctx context.Context, k client.Client, s Streams, a netip.Addr, yes bool) error {
	ipi := &estuaryv1.IPInstance{}
	name := estuaryv1.InstanceName(a)
	if err := k.Get(ctx, client.ObjectKey{Name: name}, ipi); apierrors.IsNotFound(err) {
		return fmt.Errorf("release %s: not recorded (no ipinstance %s); nothing to release", a, name)
	} else if err != nil {
		return fmt.Errorf("release %s: get ipinstance %s: %w", a, name, err)
	}
	if why, err := stillWanted(ctx, k, ipi); err != nil {
		return fmt.Errorf("release %s: %w", a, err)
	} else if why != "" {
		return fmt.Errorf("release %s: refused: %s", a, why)
	}
	b := ipi.Spec.Binding
	desc := fmt.Sprintf("%s (ipinstance %s, %s, pod %s/%s, owner %s %s)", ipi.Spec.Address.IP, ipi.Name, ipi.Status.Phase, b.Namespace, b.PodName, b.Owner.Kind, b.Owner.Name)
	if !yes && !confirm(s, "release "+desc) {
		return errors.New("release: not confirmed; nothing changed")
	}
	if err := deleteRecord(ctx, k, ipi); err != nil {
		return fmt.Errorf("release %s: %w", a, err)
	}
	return say(s.Out, "released %s", desc)
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

// stillWanted says why a record must not be released: its pod runs, or the
// StatefulSet that retains it still exists.
func stillWanted(ctx context.Context, k client.Client, ipi *estuaryv1.IPInstance) (string, error) {
	b := ipi.Spec.Binding
	if ipi.Status.Phase == estuaryv1.IPInstanceRetained && b.Owner.Kind == "StatefulSet" {
		sts := &appsv1.StatefulSet{}
		err := k.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Owner.Name}, sts)
		if err == nil && sts.DeletionTimestamp == nil {
			return fmt.Sprintf("held for StatefulSet %s/%s (pod %s), which still exists; scale it below that ordinal, delete it, or set %s=false on its pod template",
				b.Namespace, b.Owner.Name, b.PodName, estuaryv1.AnnotationIPRetain), nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("get statefulset %s/%s: %w", b.Namespace, b.Owner.Name, err)
		}
		return "", nil
	}
	pod := &corev1.Pod{}
	err := k.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.PodName}, pod)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("get pod %s/%s: %w", b.Namespace, b.PodName, err)
	}
	finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if (b.PodUID == "" || pod.UID == types.UID(b.PodUID)) && !finished {
		return fmt.Sprintf("pod %s/%s (uid %s, %s) uses it; delete the pod to release its address", b.Namespace, b.PodName, pod.UID, pod.Status.Phase), nil
	}
	return "", nil
}

// confirm asks a yes/no question on the streams; only "y" or "yes" agrees.
func confirm(s Streams, question string) bool {
	if _, err := fmt.Fprintf(s.Out, "%s? [y/N] ", question); err != nil {
		return false
	}
	line, _ := bufio.NewReader(s.In).ReadString('\n')
	answer := strings.ToLower(strings.TrimSpace(line))
	return answer == "y" || answer == "yes"
}
