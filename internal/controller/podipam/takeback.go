package podipam

// What a StatefulSet pod takes back of the addresses kept for its name.
//
// The kept records say what the pod's predecessor had, not what the pod
// asks for now: its template may have changed ip-family, ip-address or
// ip-pool, or its network may have gained a family since the addresses
// were kept. The node sets a pod up with exactly the address count its
// records carry, so a pod that took back a kept IPv4 address with the old
// count of one would come up IPv4 only, silently, though it asks for
// DualStack. So the pod takes back only what it would be given now:
//
//   - of each family it asks for (its ip-family, else the cluster default,
//     else every family its network has; plus every family its ip-address
//     or ip-pool entry names), the kept address in its network, in one of
//     the family's named subnets when it names some, and equal to the
//     address its entry names for the family when it names one;
//   - the records get the pod's address count now, so its node waits for
//     every family it asks for, and the families nothing kept are
//     allocated (or taken as named) in the same pass, the way a half
//     recorded pod is completed (complete.go);
//   - a kept address it does not take back is let go: an address reserved
//     for the workload goes back to it as Reserved, any other is released.
//     Keeping it for a family the ordinal no longer asks for would hold an
//     address nobody can use, and a later change back allocates afresh.
//
// A pod whose request cannot be worked out (refused by the rules the
// webhook applies) takes back everything with the count its records have:
// the refusal is reported when it asks for more. So does a pod whose kept
// addresses lie in another network than the one its annotations resolve
// to (a pod migrated from hybridnet onto an Underlay network without
// annotations, whose request now resolves to the Overlay network): the
// kept address wins, and families are not mixed across networks.

import (
	"context"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
)

// keptFor splits held, the addresses kept for the name of pod key, into
// those the pod takes back and those it no longer asks for, and returns
// how many addresses the pod has in all.
func (r *Reconciler) keptFor(ctx context.Context, key string, pod *corev1.Pod, held []holding) (keep, drop []holding, count int) {
	req, f, err := r.planner.plan(ctx, key, pod)
	if err != nil || slices.ContainsFunc(held, func(hd holding) bool { return hd.lease.Network != req.Network }) {
		return held, nil, held[0].count
	}
	wanted := requestFamilies(req)
	var entry []netip.Addr
	if f.fixed.Wants() {
		entry, _ = heldEntry(f, held)
	}
	for _, a := range entry {
		if fam := family.Of(a); !slices.Contains(wanted, fam) {
			wanted = append(wanted, fam)
		}
	}
	for _, hd := range held {
		if fitsRequest(hd, req, wanted, keep) && namedOrFree(entry, hd.lease.Addr) {
			keep = append(keep, hd)
		} else {
			drop = append(drop, hd)
		}
	}
	return keep, drop, len(wanted)
}

// namedOrFree: entry names a, or names no address of a's family.
func namedOrFree(entry []netip.Addr, a netip.Addr) bool {
	fam := family.Of(a)
	return !slices.ContainsFunc(entry, func(e netip.Addr) bool { return family.Of(e) == fam && e != a })
}

// dropKept lets go of the kept addresses of key that its pod no longer asks
// for: reserved ones go back to their workload, the rest are released.
// keep stays held under key.
func (r *Reconciler) dropKept(ctx context.Context, key string, keep, drop []holding) error {
	if len(drop) == 0 {
		return nil
	}
	var reserved, rest []holding
	for _, hd := range drop {
		if hd.reserved && hd.owner.Kind != "" {
			reserved = append(reserved, hd)
		} else {
			rest = append(rest, hd)
		}
	}
	log.FromContext(ctx).Info("the pod no longer asks for kept addresses; letting them go", "pod", key, "addresses", addrs(drop), "kept", addrs(keep))
	if len(reserved) > 0 {
		if err := r.ledger.toPool(ctx, key, reserved, reserved[0].owner.Key(), estuaryv1.IPInstanceReserved, time.Time{}); err != nil {
			return err
		}
	}
	if len(rest) == 0 {
		return nil
	}
	err := r.ledger.release(ctx, key, rest)
	r.held.set(key, append(slices.Clone(keep), r.held.get(key)...))
	return err
}
