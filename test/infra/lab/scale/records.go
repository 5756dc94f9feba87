package scale

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// Reservations the run adds so that the manager's cold start meets
// Config.Records IPInstances: addresses an administrator reserved for
// StatefulSets that do not exist yet (what `kubectl estuary reserve`
// records), in subnets of an underlay network no node is in, so that the
// data path of the real node is not changed by them.
const (
	reservedNetwork   = "scale-reserved"
	reservedNamespace = "scale-reserved"
	reservedFirst     = "10.84.0.0/16" // the first subnet; the next ones follow
	reservedPerSubnet = 65000
	reservedPerOwner  = 250
)

// reservedAt is the i-th reservation: its subnet index and address (the
// subnet's third address onwards: the network and gateway are not
// assignable).
func reservedAt(i int) (subnet int, a netip.Addr, err error) {
	subnet = i / reservedPerSubnet
	p, err := reservedSubnet(subnet)
	if err != nil {
		return 0, netip.Addr{}, err
	}
	a, err = nthAddr(p, 2+i%reservedPerSubnet)
	return subnet, a, err
}

func reservedSubnet(i int) (netip.Prefix, error) {
	first := netip.MustParsePrefix(reservedFirst)
	b := first.Addr().As4()
	if int(b[1])+i > 255 {
		return netip.Prefix{}, fmt.Errorf("reserved subnet %d is past 10.255.0.0/16", i)
	}
	b[1] += byte(i) //nolint:gosec // G115: checked above
	return netip.PrefixFrom(netip.AddrFrom4(b), 16), nil
}

func reservedSubnetName(i int) string { return fmt.Sprintf("%s-%d", reservedNetwork, i) }

// reservation is the record of the i-th reservation.
func reservation(i int) (*estuaryv1.IPInstance, error) {
	sn, a, err := reservedAt(i)
	if err != nil {
		return nil, err
	}
	p, _ := reservedSubnet(sn)
	gw, _ := nthAddr(p, 1)
	return &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name:   estuaryv1.InstanceName(a),
			Labels: map[string]string{estuaryv1.LabelNamespace: reservedNamespace, estuaryv1.LabelSubnet: reservedSubnetName(sn)},
		},
		Spec: estuaryv1.IPInstanceSpec{
			Network: reservedNetwork,
			Subnet:  reservedSubnetName(sn),
			Address: estuaryv1.InstanceAddress{IP: netip.PrefixFrom(a, 16).String(), Version: 4, Gateway: estuaryv1.IPAddress(gw.String()), NetID: ptr.To[int64](0)},
			Binding: estuaryv1.Binding{Namespace: reservedNamespace,
				Owner: estuaryv1.OwnerReference{Kind: "StatefulSet", Name: fmt.Sprintf("reserved-%d", i/reservedPerOwner)}},
			Reserved: true,
		},
		Status: estuaryv1.IPInstanceStatus{Phase: estuaryv1.IPInstanceReserved},
	}, nil
}

// countRecords is how many IPInstances the cluster holds.
func (r *run) countRecords(ctx context.Context) (int, error) {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(estuaryv1.GroupVersion.WithKind("IPInstanceList"))
	if err := r.c.List(ctx, l); err != nil {
		return 0, fmt.Errorf("list ipinstances: %w", err)
	}
	return len(l.Items), nil
}

// topUp adds reservations until the cluster holds Config.Records
// IPInstances, and reports how long that took.
func (r *run) topUp(ctx context.Context, rep *report) error {
	have, err := r.countRecords(ctx)
	if err != nil {
		return err
	}
	need := r.cfg.Records - have
	if need <= 0 {
		return nil
	}
	subnets := (need + reservedPerSubnet - 1) / reservedPerSubnet
	if err := createReservedNetwork(ctx, r.c, subnets); err != nil {
		return err
	}
	r.logf("records: %d IPInstances; adding %d reservations in %d subnets", have, need, subnets)
	t0 := time.Now()
	err = parallel(ctx, need, workers, func(i int) error {
		ipi, err := reservation(i)
		if err != nil {
			return err
		}
		if err := r.c.Create(ctx, ipi); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create ipinstance %s: %w", ipi.Name, err)
		}
		return nil
	})
	rep.topUp = topUp{added: need, took: time.Since(t0)}
	r.logf("records: %d reservations added in %s", need, round(rep.topUp.took))
	return err
}

// topUp is what the run added before the cold start.
type topUp struct {
	added int
	took  time.Duration
}

// createReservedNetwork creates the namespace of the reservations (the
// manager releases what is kept for a workload of a namespace that is
// gone), their network (its nodes: those labelled with a domain no node
// has) and n subnets.
func createReservedNetwork(ctx context.Context, c client.Client, n int) error {
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: reservedNamespace}}, &estuaryv1.Network{
		ObjectMeta: metav1.ObjectMeta{Name: reservedNetwork},
		Spec: estuaryv1.NetworkSpec{
			Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeVLAN, NetID: ptr.To[int64](0),
			NodeSelector: map[string]string{domainLabel: "reserved"},
		},
	}}
	for i := range n {
		p, err := reservedSubnet(i)
		if err != nil {
			return err
		}
		gw, _ := nthAddr(p, 1)
		objs = append(objs, &estuaryv1.Subnet{
			ObjectMeta: metav1.ObjectMeta{Name: reservedSubnetName(i)},
			Spec: estuaryv1.SubnetSpec{Network: reservedNetwork, Range: estuaryv1.AddressRange{
				Version: 4, CIDR: p.String(), Gateway: estuaryv1.IPAddress(gw.String()),
			}},
		})
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}
