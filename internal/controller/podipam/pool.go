package podipam

// A pod takes from its workload's pool before anything is allocated: what
// the pod of the same name used last first (a StatefulSet's ordinal gets
// its reserved address back), then anything that fits its request, each
// handed over with one record update (ledger.handOver). The pool itself is
// settled by the pool controller (poolreconciler.go).

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// takePooled gives pod, which holds nothing yet, what its workload keeps:
// at most one address per family of req that the pool has in req's network
// (in one of the family's named subnets, when it names some). Each is
// handed over with one record update. It returns the holdings taken and
// the families still to allocate.
func (r *Reconciler) takePooled(ctx context.Context, key string, pod *corev1.Pod, f facts, req ipam.Request) ([]holding, []family.Family, error) {
	wanted := requestFamilies(req)
	if f.owner.Kind == "" {
		return nil, wanted, nil
	}
	pool := f.owner.Key()
	fits := func(hd holding, chosen []holding) bool { return fitsRequest(hd, req, wanted, chosen) }
	// What the pod of the same name used last comes first (a StatefulSet's
	// ordinal gets its reserved address back), then anything that fits.
	taken := r.held.takeInHand(pool, func(hd holding, chosen []holding) bool { return hd.pod == pod.Name && fits(hd, chosen) })
	taken = append(taken, r.held.takeInHand(pool, func(hd holding, chosen []holding) bool { return fits(hd, append(taken, chosen...)) })...)
	if len(taken) == 0 {
		return nil, wanted, nil
	}
	got, err := r.ledger.handOver(ctx, pool, key, pod, f, taken, len(wanted))
	if err != nil {
		return nil, nil, err
	}
	var rest []family.Family
	for _, fam := range wanted {
		if !slices.ContainsFunc(got, func(hd holding) bool { return hd.lease.Family == fam }) {
			rest = append(rest, fam)
		}
	}
	return got, rest, nil
}

// fitsRequest: hd may serve req, whose families are wanted, next to the
// holdings chosen already: it is in req's network, of a wanted family
// chosen has none of, and in one of the family's named subnets when req
// names some.
func fitsRequest(hd holding, req ipam.Request, wanted []family.Family, chosen []holding) bool {
	fam := hd.lease.Family
	if hd.lease.Network != req.Network || !slices.Contains(wanted, fam) ||
		slices.ContainsFunc(chosen, func(c holding) bool { return c.lease.Family == fam }) {
		return false
	}
	return len(req.Subnets[fam]) == 0 || slices.Contains(req.Subnets[fam], hd.lease.Subnet)
}
