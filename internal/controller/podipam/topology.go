package podipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// Topology mirrors Networks and Subnets into the allocator and answers what
// the pod controller needs to know about them.
type Topology struct {
	Client client.Client
	Alloc  Allocator

	mu       sync.RWMutex
	networks map[string]estuaryv1.NetworkSpec
	subnets  map[string]*estuaryv1.Subnet
}

// NewTopology returns an empty topology for alloc.
func NewTopology(c client.Client, alloc Allocator) *Topology {
	return &Topology{Client: c, Alloc: alloc, networks: map[string]estuaryv1.NetworkSpec{}, subnets: map[string]*estuaryv1.Subnet{}}
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

// NetID is the VNI, VLAN id or ASN recorded with an address: the subnet's
// override, else the network's.
func (t *Topology) NetID(network, subnet string) *int64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if sn, ok := t.subnets[subnet]; ok && sn.Spec.NetID != nil {
		v := *sn.Spec.NetID
		return &v
	}
	if spec, ok := t.networks[network]; ok && spec.NetID != nil {
		v := *spec.NetID
		return &v
	}
	return nil
}

// leaseFor describes the known subnet that contains a.
func (t *Topology) leaseFor(a netip.Addr) (ipam.Lease, bool) {
	for _, name := range t.Alloc.Subnets() {
		cfg, err := t.Alloc.Subnet(name)
		if err != nil || !cfg.Prefix.Contains(a) {
			continue
		}
		return ipam.Lease{Subnet: name, Network: cfg.Network, Family: familyOf(a), Addr: a, Prefix: cfg.Prefix, Gateway: cfg.Gateway}, true
	}
	return ipam.Lease{}, false
}

// load reads every Network and Subnet live and installs them in the
// allocator; it runs once, before the rebuild.
func (t *Topology) load(ctx context.Context, reader client.Reader) error {
	var nets estuaryv1.NetworkList
	if err := reader.List(ctx, &nets); err != nil {
		return fmt.Errorf("list networks: %w", err)
	}
	var sns estuaryv1.SubnetList
	if err := reader.List(ctx, &sns); err != nil {
		return fmt.Errorf("list subnets: %w", err)
	}
	for i := range nets.Items {
		t.setNetwork(&nets.Items[i])
	}
	var errs []error
	for i := range sns.Items {
		if err := t.setSubnet(&sns.Items[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (t *Topology) setNetwork(n *estuaryv1.Network) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.networks[n.Name] = *n.Spec.DeepCopy()
}

// setSubnet adds or updates a subnet in the allocator. A subnet whose network
// does not exist is still installed (its addresses may be recorded), but pods
// cannot be given addresses from a network the topology does not know.
func (t *Topology) setSubnet(sn *estuaryv1.Subnet) error {
	cfg, err := subnetConfig(sn)
	if err != nil {
		return err
	}
	if _, err := t.Alloc.Subnet(sn.Name); err == nil {
		if err := t.Alloc.UpdateSubnet(cfg); err != nil {
			return fmt.Errorf("update subnet %s in the allocator: %w", sn.Name, err)
		}
	} else {
		if err := t.Alloc.AddSubnet(cfg); err != nil {
			return fmt.Errorf("add subnet %s to the allocator: %w", sn.Name, err)
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
	return ctrl.Result{}, r.Topology.setSubnet(sn)
}

func netipPrefix(l ipam.Lease) string {
	return netip.PrefixFrom(l.Addr, l.Prefix.Bits()).String()
}

func versionOf(f ipam.Family) int32 {
	if f == ipam.IPv6 {
		return 6
	}
	return 4
}

func typesUID(s string) types.UID { return types.UID(s) }
