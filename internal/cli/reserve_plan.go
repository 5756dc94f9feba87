package cli

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// reservePlan is what a reserve will do: the records to create, the
// records that already hold the same reservation, and why addresses are
// refused (any refusal, and nothing is written).
type reservePlan struct {
	create  []*estuaryv1.IPInstance
	already []*estuaryv1.IPInstance
	refused []error
}

// refusedAddr is why one address cannot be reserved.
type refusedAddr struct {
	addr netip.Addr
	err  error
}

func (r *refusedAddr) Error() string { return "  " + r.addr.String() + ": " + r.err.Error() }
func (r *refusedAddr) Unwrap() error { return r.err }

// planner checks the addresses of one request against the subnets and
// the records, reading each Network once.
type planner struct {
	k       client.Client
	req     reserveRequest
	owner   estuaryv1.OwnerReference
	subnets []estuaryv1.Subnet
	nets    map[string]*estuaryv1.NetworkSpec
}

// planReserve checks every address of req; it returns an error only when
// it could not read what it needs.
func planReserve(ctx context.Context, k client.Client, req reserveRequest, owner estuaryv1.OwnerReference) (reservePlan, error) {
	var p reservePlan
	var list estuaryv1.SubnetList
	if err := k.List(ctx, &list); err != nil {
		return p, fmt.Errorf("list subnets: %w", err)
	}
	if req.subnet != "" && !slices.ContainsFunc(list.Items, func(sn estuaryv1.Subnet) bool { return sn.Name == req.subnet }) {
		return p, fmt.Errorf("--subnet: no subnet %s", req.subnet)
	}
	pl := &planner{k: k, req: req, owner: owner, subnets: list.Items, nets: map[string]*estuaryv1.NetworkSpec{}}
	for _, a := range req.addrs {
		ipi, already, err := pl.one(ctx, a)
		var refused *refusedAddr
		switch {
		case errors.As(err, &refused):
			p.refused = append(p.refused, err)
		case err != nil:
			return p, err
		case already:
			p.already = append(p.already, ipi)
		default:
			p.create = append(p.create, ipi)
		}
	}
	return p, nil
}

// one checks address a: the record to create for it, or the record that
// already reserves it for the same owner (already), or a *refusedAddr.
func (pl *planner) one(ctx context.Context, a netip.Addr) (ipi *estuaryv1.IPInstance, already bool, err error) {
	sn, prefix, err := pickSubnet(pl.subnets, a, pl.req.subnet)
	if err != nil {
		return nil, false, &refusedAddr{a, err}
	}
	existing := &estuaryv1.IPInstance{}
	err = pl.k.Get(ctx, client.ObjectKey{Name: estuaryv1.InstanceName(a)}, existing)
	switch {
	case err == nil && sameReservation(existing, pl.req):
		return existing, true, nil
	case err == nil:
		return nil, false, &refusedAddr{a, fmt.Errorf("already recorded: %s", holder(existing))}
	case !apierrors.IsNotFound(err):
		return nil, false, fmt.Errorf("get ipinstance %s: %w", estuaryv1.InstanceName(a), err)
	}
	cfg, err := netmodel.SubnetConfig(sn)
	if err != nil {
		return nil, false, &refusedAddr{a, err}
	}
	if err := ipam.CheckAddr(cfg, a); err != nil {
		return nil, false, &refusedAddr{a, fmt.Errorf("not assignable: %w", err)}
	}
	n, err := pl.network(ctx, sn)
	if err != nil {
		return nil, false, err
	}
	return reservation(a, prefix, sn, n, pl.req.ns, pl.owner), false, nil
}

// sameReservation: ipi is an administrator's reservation for the owner req
// names.
func sameReservation(ipi *estuaryv1.IPInstance, req reserveRequest) bool {
	b := ipi.Spec.Binding
	return ipi.Spec.Reserved && b.Namespace == req.ns && b.Owner.Kind == req.kind && b.Owner.Name == req.name
}

// pickSubnet is the subnet whose CIDR holds a: the one named want, else
// the only one.
func pickSubnet(subnets []estuaryv1.Subnet, a netip.Addr, want string) (*estuaryv1.Subnet, netip.Prefix, error) {
	var in []*estuaryv1.Subnet
	var prefixes []netip.Prefix
	for i := range subnets {
		p, err := netip.ParsePrefix(subnets[i].Spec.Range.CIDR)
		if err == nil && p.Contains(a) && (want == "" || subnets[i].Name == want) {
			in, prefixes = append(in, &subnets[i]), append(prefixes, p)
		}
	}
	switch {
	case len(in) == 0 && want != "":
		cidr := ""
		if i := slices.IndexFunc(subnets, func(sn estuaryv1.Subnet) bool { return sn.Name == want }); i >= 0 {
			cidr = subnets[i].Spec.Range.CIDR
		}
		return nil, netip.Prefix{}, fmt.Errorf("outside subnet %s (spec.range.cidr %s)", want, cidr)
	case len(in) == 0:
		return nil, netip.Prefix{}, errors.New("outside every subnet")
	case len(in) > 1:
		names := make([]string, len(in))
		for i, sn := range in {
			names[i] = sn.Name + " (" + sn.Spec.Range.CIDR + ")"
		}
		return nil, netip.Prefix{}, fmt.Errorf("in the CIDRs of several subnets, %s: choose one with --subnet", strings.Join(names, ", "))
	case in[0].DeletionTimestamp != nil:
		return nil, netip.Prefix{}, fmt.Errorf("subnet %s is being deleted", in[0].Name)
	}
	return in[0], prefixes[0], nil
}

// network is the spec of a subnet's Network, nil when it does not exist.
func (pl *planner) network(ctx context.Context, sn *estuaryv1.Subnet) (*estuaryv1.NetworkSpec, error) {
	name := sn.Spec.Network
	if spec, ok := pl.nets[name]; ok {
		return spec, nil
	}
	n := &estuaryv1.Network{}
	err := pl.k.Get(ctx, client.ObjectKey{Name: name}, n)
	var spec *estuaryv1.NetworkSpec
	switch {
	case err == nil:
		spec = &n.Spec
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get network %s (spec.network of subnet %s): %w", name, sn.Name, err)
	}
	pl.nets[name] = spec
	return spec, nil
}

// reservation is the record of a reserved for owner: Reserved, with the
// labels, network identifier and gateway the manager records with an
// address of subnet sn.
func reservation(a netip.Addr, prefix netip.Prefix, sn *estuaryv1.Subnet, n *estuaryv1.NetworkSpec, ns string, owner estuaryv1.OwnerReference) *estuaryv1.IPInstance {
	return &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name:   estuaryv1.InstanceName(a),
			Labels: map[string]string{estuaryv1.LabelNamespace: ns, estuaryv1.LabelSubnet: sn.Name},
		},
		Spec: estuaryv1.IPInstanceSpec{
			Network: sn.Spec.Network,
			Subnet:  sn.Name,
			Address: estuaryv1.InstanceAddress{
				IP:      netip.PrefixFrom(a, prefix.Bits()).String(),
				Version: int32(family.Of(a).Version()),
				Gateway: sn.Spec.Range.Gateway,
				NetID:   netmodel.NetID(n, &sn.Spec),
			},
			Binding:  estuaryv1.Binding{Namespace: ns, Owner: owner},
			Reserved: true,
		},
		Status: estuaryv1.IPInstanceStatus{Phase: estuaryv1.IPInstanceReserved},
	}
}
