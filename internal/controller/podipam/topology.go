package podipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// Topology mirrors Networks and Subnets into the allocator and answers what
// the pod controller needs to know about them.
//
// A subnet is fail-closed: it is allocatable only once every address
// recorded for it is held. During the rebuild the records come from the
// rebuild's own list; a subnet that appears later (new, or one that could
// not be installed before) is installed together with its records, read
// live, in one step (ipam.Allocator.AddSubnet with records). If they cannot
// be read the subnet stays out of the allocator and is tried again.
type Topology struct {
	Client client.Client
	Live   client.Reader // live reads of the records of a subnet being installed
	Alloc  Allocator

	mu       sync.RWMutex
	networks map[string]estuaryv1.NetworkSpec
	subnets  map[string]*estuaryv1.Subnet
}

// NewTopology returns an empty topology for alloc.
func NewTopology(c client.Client, live client.Reader, alloc Allocator) *Topology {
	return &Topology{Client: c, Live: live, Alloc: alloc, networks: map[string]estuaryv1.NetworkSpec{}, subnets: map[string]*estuaryv1.Subnet{}}
}

// Overlay is the name of the cluster's Overlay network, or "".
func (t *Topology) Overlay() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	best := ""
	for name, spec := range t.networks {
		if spec.Type == estuaryv1.NetworkTypeOverlay && (best == "" || name < best) {
			best = name
		}
	}
	return best
}

// NetID is the VNI, VLAN id or ASN recorded with an address
// (netmodel.NetID): the subnet's override, else the network's, else an
// Overlay network's VNI.
func (t *Topology) NetID(network, subnet string) *int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var sn *estuaryv1.SubnetSpec
	if s, ok := t.subnets[subnet]; ok {
		sn = &s.Spec
	}
	var n *estuaryv1.NetworkSpec
	if spec, ok := t.networks[network]; ok {
		n = &spec
	}
	return netmodel.NetID(n, sn)
}

// leaseFor describes the known subnet that contains a.
func (t *Topology) leaseFor(a netip.Addr) (ipam.Lease, bool) {
	for _, name := range t.Alloc.Subnets() {
		cfg, err := t.Alloc.Subnet(name)
		if err != nil || !cfg.Prefix.Contains(a) {
			continue
		}
		return ipam.Lease{Subnet: name, Network: cfg.Network, Family: family.Of(a), Addr: a, Prefix: cfg.Prefix, Gateway: cfg.Gateway}, true
	}
	return ipam.Lease{}, false
}

// leaseIn is the lease of a in the named subnet.
func (t *Topology) leaseIn(subnet string, a netip.Addr) (ipam.Lease, bool) {
	cfg, err := t.Alloc.Subnet(subnet)
	if err != nil || !cfg.Prefix.Contains(a) {
		return ipam.Lease{}, false
	}
	return ipam.Lease{Subnet: subnet, Network: cfg.Network, Family: family.Of(a), Addr: a, Prefix: cfg.Prefix, Gateway: cfg.Gateway}, true
}

// load reads every Network and Subnet live and installs them in the
// allocator; it runs once, before the rebuild, whose records then fill the
// subnets. A failed list is returned (the caller retries: nothing may be
// allocated without the full picture); subnets that cannot be installed are
// returned in the second result and stay out of the allocator, so nothing
// is allocated from them until the subnet controller installs them with
// their records.
func (t *Topology) load(ctx context.Context) (notInstalled []error, err error) {
	var nets estuaryv1.NetworkList
	if err := t.Live.List(ctx, &nets); err != nil {
		return nil, fmt.Errorf("list networks: %w", err)
	}
	var sns estuaryv1.SubnetList
	if err := t.Live.List(ctx, &sns); err != nil {
		return nil, fmt.Errorf("list subnets: %w", err)
	}
	for i := range nets.Items {
		t.setNetwork(&nets.Items[i])
	}
	for i := range sns.Items {
		if err := t.setSubnet(ctx, &sns.Items[i], false); err != nil {
			notInstalled = append(notInstalled, err)
		}
	}
	return notInstalled, nil
}

// subnetRecords reads the records of one subnet live. The API server cannot
// select on spec.subnet and a label may be missing, so every record is read
// and filtered.
func (t *Topology) subnetRecords(ctx context.Context, subnet string) ([]ipam.Record, error) {
	var list estuaryv1.IPInstanceList
	if err := t.Live.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list ipinstances to install subnet %s: %w", subnet, err)
	}
	var out []ipam.Record
	for i := range list.Items {
		if list.Items[i].Spec.Subnet != subnet {
			continue
		}
		rec, err := record(&list.Items[i])
		if err != nil {
			return nil, fmt.Errorf("install subnet %s: %w", subnet, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

func (t *Topology) setNetwork(n *estuaryv1.Network) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.networks[n.Name] = *n.Spec.DeepCopy()
}

// setSubnet adds or updates a subnet in the allocator. A subnet whose network
// does not exist is still installed (its addresses may be recorded), but pods
// cannot be given addresses from a network the topology does not know. A
// subnet new to the allocator is added with its records, read live, when
// withRecords is set (after the rebuild); during the rebuild the rebuild's
// records fill it.
func (t *Topology) setSubnet(ctx context.Context, sn *estuaryv1.Subnet, withRecords bool) error {
	cfg, err := netmodel.SubnetConfig(sn)
	if err != nil {
		return err
	}
	if _, err := t.Alloc.Subnet(sn.Name); err == nil {
		if err := t.Alloc.UpdateSubnet(cfg); err != nil {
			return fmt.Errorf("update subnet %s in the allocator: %w", sn.Name, err)
		}
	} else {
		var recs []ipam.Record
		if withRecords {
			if recs, err = t.subnetRecords(ctx, sn.Name); err != nil {
				return err
			}
		}
		var rb *ipam.RebuildError
		if err := t.Alloc.AddSubnet(cfg, recs...); err != nil && !errors.As(err, &rb) {
			return fmt.Errorf("add subnet %s to the allocator: %w", sn.Name, err)
		} else if rb != nil {
			log.FromContext(ctx).Error(rb, "subnet installed; some of its records conflict", "subnet", sn.Name)
		}
		// A new subnet resumes after the last address handed out before a
		// restart, so the cool-down of released addresses survives it. Later
		// updates never move the cursor back.
		if a, err := netip.ParseAddr(sn.Status.LastAllocatedIP); err == nil {
			_ = t.Alloc.SetCursor(sn.Name, a)
		}
	}
	t.mu.Lock()
	t.subnets[sn.Name] = sn.DeepCopy()
	t.mu.Unlock()
	return nil
}

// NetworkReconciler keeps networks current in the topology.
type NetworkReconciler struct{ Topology *Topology }

// Reconcile records or forgets one network.
func (r *NetworkReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	n := &estuaryv1.Network{}
	err := r.Topology.Client.Get(ctx, req.NamespacedName, n)
	if apierrors.IsNotFound(err) {
		r.Topology.mu.Lock()
		delete(r.Topology.networks, req.Name)
		r.Topology.mu.Unlock()
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("get network %s: %w", req.Name, err)
	}
	r.Topology.setNetwork(n)
	return ctrl.Result{}, nil
}

// SubnetReconciler keeps subnets current in the allocator.
type SubnetReconciler struct {
	Topology *Topology
	Ready    *readiness
}

// Reconcile adds, updates or removes one subnet.
func (r *SubnetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.Ready.wait(ctx); err != nil {
		return ctrl.Result{}, err
	}
	sn := &estuaryv1.Subnet{}
	err := r.Topology.Client.Get(ctx, req.NamespacedName, sn)
	if apierrors.IsNotFound(err) {
		if err := r.Topology.Alloc.RemoveSubnet(req.Name); err != nil && !errors.Is(err, ipam.ErrUnknownSubnet) {
			return ctrl.Result{}, fmt.Errorf("remove subnet %s from the allocator: %w", req.Name, err)
		}
		r.Topology.mu.Lock()
		delete(r.Topology.subnets, req.Name)
		r.Topology.mu.Unlock()
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("get subnet %s: %w", req.Name, err)
	}
	return ctrl.Result{}, r.Topology.setSubnet(ctx, sn, true)
}

func netipPrefix(l ipam.Lease) string {
	return netip.PrefixFrom(l.Addr, l.Prefix.Bits()).String()
}

// objects lists the known networks and subnets as the webhook's rules take
// them, sorted by name. The copies share maps and slices with the topology,
// which replaces its objects rather than changing them: callers only read.
func (t *Topology) objects() ([]estuaryv1.Network, []estuaryv1.Subnet) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	networks := make([]estuaryv1.Network, 0, len(t.networks))
	for name, spec := range t.networks {
		networks = append(networks, estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
	}
	sort.Slice(networks, func(i, j int) bool { return networks[i].Name < networks[j].Name })
	subnets := make([]estuaryv1.Subnet, 0, len(t.subnets))
	for _, sn := range t.subnets {
		subnets = append(subnets, *sn)
	}
	sort.Slice(subnets, func(i, j int) bool { return subnets[i].Name < subnets[j].Name })
	return networks, subnets
}
