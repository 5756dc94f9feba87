package cli

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// maxReserve is the most addresses one reserve command records.
const maxReserve = 256

func reserveCmd(o *options) *cobra.Command {
	var owner, subnet string
	c := &cobra.Command{
		Use:   "reserve ADDRESS|FIRST-LAST --for KIND/NAME",
		Short: "Reserve addresses for a workload: only its pods are given them, until released by hand",
		Long: `reserve records each address as Reserved for the workload --for names, in the
namespace -n names: the manager hands it only to a pod of that workload, and
keeps it for the workload when that pod goes, until 'release' deletes it.
KIND is sts, deploy, rs, ds, job, cj or pod; the workload need not exist yet.
The subnet is the one whose CIDR holds the address (--subnet chooses when
several do). A range FIRST-LAST holds at most 256 addresses of one family and
is reserved whole or not at all. An address already reserved for the same
workload is reported and left as it is.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			addrs, err := parseAddrRange(args[0])
			if err != nil {
				return fmt.Errorf("reserve: %w", err)
			}
			kind, name, err := parseWorkload(owner)
			if err != nil {
				return fmt.Errorf("reserve: --for: %w", err)
			}
			k, err := o.newClient()
			if err != nil {
				return err
			}
			req := reserveRequest{what: args[0], ns: o.ns(), kind: kind, name: name, subnet: subnet, addrs: addrs}
			return reserve(cmd.Context(), k, o.streams, req)
		},
	}
	c.Flags().StringVar(&owner, "for", "", "KIND/NAME of the workload the addresses are for (e.g. sts/web, deploy/api)")
	c.Flags().StringVar(&subnet, "subnet", "", "subnet to reserve in, when the CIDRs of several subnets hold the address")
	_ = c.MarkFlagRequired("for")
	return c
}

// parseAddrRange reads one address or an inclusive range FIRST-LAST of at
// most maxReserve addresses of one family.
func parseAddrRange(s string) ([]netip.Addr, error) {
	firstText, lastText, isRange := strings.Cut(s, "-")
	first, err := parseAddr(firstText)
	if err != nil {
		return nil, err
	}
	if !isRange {
		return []netip.Addr{first}, nil
	}
	last, err := parseAddr(lastText)
	if err != nil {
		return nil, err
	}
	switch {
	case first.Is4() != last.Is4():
		return nil, fmt.Errorf("range %s mixes IPv4 and IPv6: a range is of one family", s)
	case last.Less(first):
		return nil, fmt.Errorf("range %s: %s comes after %s", s, first, last)
	}
	var out []netip.Addr
	for a := first; ; a = a.Next() {
		if len(out) == maxReserve {
			return nil, fmt.Errorf("range %s holds more than %d addresses: reserve at most %d at once", s, maxReserve, maxReserve)
		}
		out = append(out, a)
		if a == last {
			return out, nil
		}
	}
}

func parseAddr(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", s)
	}
	return a, nil
}

// reserveRequest is what reserve was asked: addrs (parsed from what) for
// the workload kind/name of ns, in the named subnet when not empty.
type reserveRequest struct {
	what, ns, kind, name, subnet string
	addrs                        []netip.Addr
}

func (r reserveRequest) owner() string { return fmt.Sprintf("%s %s/%s", r.kind, r.ns, r.name) }

// reserve records every address of req as Reserved for its workload, or
// none: every address is checked before any is written, and a create that
// fails (an address recorded meanwhile) deletes the records this call made.
func reserve(ctx context.Context, k client.Client, s Streams, req reserveRequest) error {
	owner, exists, err := lookupOwner(ctx, k, req)
	if err != nil {
		return fmt.Errorf("reserve %s: %w", req.what, err)
	}
	p, err := planReserve(ctx, k, req, owner)
	if err != nil {
		return fmt.Errorf("reserve %s for %s: %w", req.what, req.owner(), err)
	}
	if len(p.refused) > 0 {
		return fmt.Errorf("reserve %s for %s: refused, nothing changed:\n%w", req.what, req.owner(), errors.Join(p.refused...))
	}
	if !exists {
		if err := say(s.Out, "note: %s does not exist now; its pods will get the addresses once it does", req.owner()); err != nil {
			return err
		}
	}
	for _, ipi := range p.already {
		if err := say(s.Out, "%s is already reserved for %s (%s)", ipi.Spec.Address.IP, req.owner(), holder(ipi)); err != nil {
			return err
		}
	}
	created, err := createAll(ctx, k, p.create)
	if err != nil {
		return fmt.Errorf("reserve %s for %s: %w", req.what, req.owner(), rollback(ctx, k, created, err))
	}
	for _, ipi := range created {
		if err := say(s.Out, "reserved %s for %s (ipinstance %s, subnet %s)", ipi.Spec.Address.IP, req.owner(), ipi.Name, ipi.Spec.Subnet); err != nil {
			return err
		}
	}
	return nil
}

// lookupOwner is the owner reference a reservation records, with the
// workload's UID when it exists now and its kind is one the manager
// records. exists is false when it was looked up and not found.
func lookupOwner(ctx context.Context, k client.Client, req reserveRequest) (ref estuaryv1.OwnerReference, exists bool, err error) {
	ref = estuaryv1.OwnerReference{Kind: req.kind, Name: req.name}
	gvk, known := ownerKinds[req.kind]
	if !known {
		return ref, true, nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	err = k.Get(ctx, client.ObjectKey{Namespace: req.ns, Name: req.name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		return ref, false, nil
	case err != nil:
		return ref, false, fmt.Errorf("get %s: %w", req.owner(), err)
	}
	ref.UID = string(obj.UID)
	return ref, true, nil
}

// createAll creates the records in order and returns those it created,
// and the first failure.
func createAll(ctx context.Context, k client.Client, recs []*estuaryv1.IPInstance) ([]*estuaryv1.IPInstance, error) {
	var created []*estuaryv1.IPInstance
	for _, ipi := range recs {
		err := k.Create(ctx, ipi)
		if apierrors.IsAlreadyExists(err) {
			return created, fmt.Errorf("%s was recorded meanwhile (%s): %w", ipi.Spec.Address.IP, recordedNow(ctx, k, ipi.Name), err)
		}
		if err != nil {
			return created, fmt.Errorf("create ipinstance %s: %w", ipi.Name, err)
		}
		created = append(created, ipi)
	}
	return created, nil
}

// recordedNow names who holds the record name now, as far as it can be
// read.
func recordedNow(ctx context.Context, k client.Client, name string) string {
	ipi := &estuaryv1.IPInstance{}
	if err := k.Get(ctx, client.ObjectKey{Name: name}, ipi); err != nil {
		return fmt.Sprintf("ipinstance %s cannot be read: %v", name, err)
	}
	return holder(ipi)
}

// rollback deletes the records a failed reserve created, each only if it
// is still the object created, and returns cause with what it undid.
func rollback(ctx context.Context, k client.Client, created []*estuaryv1.IPInstance, cause error) error {
	if len(created) == 0 {
		return fmt.Errorf("%w; nothing was reserved", cause)
	}
	var undone []string
	var left []error
	for _, ipi := range created {
		if err := deleteRecord(ctx, k, ipi); err != nil {
			left = append(left, err)
			continue
		}
		undone = append(undone, ipi.Name)
	}
	if len(left) == 0 {
		return fmt.Errorf("%w; rolled back: deleted the %d record(s) this command created %v", cause, len(undone), undone)
	}
	return fmt.Errorf("%w; rollback deleted %v but not: %w", cause, undone, errors.Join(left...))
}
