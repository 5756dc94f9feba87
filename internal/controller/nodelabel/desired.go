package nodelabel

import (
	"math/big"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/family"
)

// Availability says, per network and family, whether a pod that names no
// subnet can still get an address: some non-private subnet of the network
// and family has status.available other than "0". A subnet whose status has
// not been written yet counts as available, so a new subnet is not reported
// full before the manager has counted it; the allocator still refuses when
// it really is.
type Availability map[string]map[family.Family]bool

// AvailabilityOf computes Availability from the subnets' status.
func AvailabilityOf(subnets []estuaryv1.Subnet) Availability {
	av := Availability{}
	for i := range subnets {
		sn := &subnets[i]
		if sn.Spec.Private || sn.DeletionTimestamp != nil {
			continue
		}
		if av[sn.Spec.Network] == nil {
			av[sn.Spec.Network] = map[family.Family]bool{}
		}
		f := netmodel.SubnetFamily(&sn.Spec)
		av[sn.Spec.Network][f] = av[sn.Spec.Network][f] || hasFree(sn.Status.Available)
	}
	return av
}

// hasFree reads a decimal status.available; empty or unparsable is unknown,
// which counts as free.
func hasFree(available string) bool {
	n, ok := new(big.Int).SetString(available, 10)
	if !ok {
		return true
	}
	return n.Sign() > 0
}

// Desired is the set of managed labels a node with nodeLabels should carry:
// for each network attached to it, netmodel.NetworkKey=attached and, per family,
// netmodel.AvailableKey=true|false. A family the network has no public subnet of is
// false.
func Desired(nodeLabels map[string]string, networks []estuaryv1.Network, av Availability) map[string]string {
	want := map[string]string{}
	for i := range networks {
		n := &networks[i]
		if n.DeletionTimestamp != nil || !netmodel.Attached(n, nodeLabels) {
			continue
		}
		want[netmodel.NetworkKey(n.Name)] = netmodel.ValueAttached
		for _, f := range []family.Family{family.IPv4, family.IPv6} {
			v := netmodel.ValueFalse
			if av[n.Name][f] {
				v = netmodel.ValueTrue
			}
			want[netmodel.AvailableKey(n.Name, f)] = v
		}
	}
	return want
}

// Changes is what must change on a node with labels have so that its managed
// labels are exactly want: keys to set (with their values) and managed keys
// to remove. Labels outside the managed keys are ignored. It returns nil
// when nothing differs.
func Changes(have, want map[string]string) map[string]*string {
	var ch map[string]*string
	add := func(k string, v *string) {
		if ch == nil {
			ch = map[string]*string{}
		}
		ch[k] = v
	}
	for k, v := range want {
		if cur, ok := have[k]; !ok || cur != v {
			add(k, &v)
		}
	}
	for k := range have {
		if _, keep := want[k]; !keep && netmodel.Managed(k) {
			add(k, nil)
		}
	}
	return ch
}
