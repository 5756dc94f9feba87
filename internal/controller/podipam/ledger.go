package podipam

// The ledger changes who holds an address, in one order: the record first,
// memory after (the allocator and the holdings). It is shared by the pod
// controller, the pool controller and the retention rules, and is the only
// one that writes IPInstances (through a recordStore):
//
//   - this file: a pod's new addresses recorded (recordLeases, one create
//     each, the only API writes of an allocation) and undone (abandon);
//   - records.go: the conditional update and delete of a record held as
//     the writer expects;
//   - moves.go: every other change of holder (release, retain, rebind,
//     hand-over out of a pool, move between the pods of a machine, back to
//     a pool, to the holder a record names).
//
// The holdings are the ledger's memory and the allocator's shadow: a key's
// list is replaced only by the reconcile serving that key, and holdings
// move between keys only through holdings.take and holdings.add.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/workload"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// ledger writes the records and keeps memory in step with them.
type ledger struct {
	store   recordStore
	alloc   Allocator
	held    *holdings
	pending *pendingAdoptions
	queue   *queues
	events  EventRecorder
	topo    *Topology // the NetID recorded with an address
}

// recordLeases records each lease as an IPInstance (one create each: the
// only API writes of an allocation) and holds them for the pod after the
// holdings it already has (prior); count is how many addresses the pod has
// in all.
//
// A create that fails is handled by what its failure says about the record:
// AlreadyExists means another owner holds the address (it is held for that
// owner and another is chosen); a refusal (invalid, forbidden) means nothing
// was stored, so the leases are released. Any other failure (a timeout, a
// lost connection) leaves the outcome unknown: the API server may have
// stored the record. Then no address is freed: every lease stays held and
// the next pass confirms each record or creates it (complete).
func (l *ledger) recordLeases(ctx context.Context, key string, pod *corev1.Pod, leases []ipam.Lease, count int, prior []holding, f facts) (ctrl.Result, error) {
	hds := make([]holding, len(leases))
	for i, ls := range leases {
		hds[i] = holding{lease: ls, name: estuaryv1.InstanceName(ls.Addr), podUID: string(pod.UID), node: pod.Spec.NodeName,
			phase: estuaryv1.IPInstanceBound, set: f.set, count: count, pod: pod.Name, owner: f.owner, retain: f.retain, mac: f.mac}
	}
	setMAC(hds, prior, f)
	for i, hd := range hds {
		err := l.store.Create(ctx, l.instance(pod, hd))
		switch {
		case err == nil:
			hds[i].recorded = time.Now()
			continue
		case apierrors.IsAlreadyExists(err):
			l.held.set(key, prior)
			l.abandon(ctx, key, leases, hds[:i])
			return ctrl.Result{RequeueAfter: conflictRetry}, l.adoptConflict(ctx, pod, hd.lease)
		case refused(err):
			l.held.set(key, prior)
			l.abandon(ctx, key, leases, hds[:i])
			return ctrl.Result{}, fmt.Errorf("record %s for pod %s: %w", hd.lease.Addr, key, err)
		default:
			l.held.set(key, append(prior, hds...))
			return ctrl.Result{}, fmt.Errorf("record %s for pod %s: outcome unknown, its addresses stay held until their records are confirmed: %w", hd.lease.Addr, key, err)
		}
	}
	l.held.set(key, append(prior, hds...))
	log.FromContext(ctx).V(1).Info("allocated", "pod", key, "addresses", addrs(hds))
	return ctrl.Result{}, nil
}

// setMAC gives every new holding of a pod the same MAC: the one its other
// addresses have (handed over already, or recorded by an earlier pass),
// else the stable MAC when its addresses may be kept (see below).
func setMAC(hds, prior []holding, f facts) {
	if f.mac != "" || len(hds) == 0 {
		return
	}
	mac := ""
	if len(prior) > 0 {
		mac = prior[0].mac
	} else if f.keepsMAC() {
		mac = podMAC("", hds)
	}
	for i := range hds {
		hds[i].mac = mac
	}
}

// refused: the API server answered and stored nothing.
func refused(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err) || apierrors.IsUnauthorized(err)
}

// abandon undoes a partial allocation: the records created so far are
// deleted and every lease is released in memory.
func (l *ledger) abandon(ctx context.Context, key string, leases []ipam.Lease, created []holding) {
	for _, hd := range created {
		err := l.deleteRecord(ctx, key, hd)
		if he, ok := asHeldElsewhere(err); ok {
			err = l.giveTo(ctx, key, hd, he.record)
		}
		if err != nil {
			log.FromContext(ctx).Error(err, "undo partial allocation", "pod", key, "address", hd.lease.Addr)
			l.held.add(key, hd)
		}
	}
	for _, ls := range leases {
		if l.held.holdsLease(key, ls) {
			continue
		}
		_ = l.alloc.Release(ls.Subnet, ls.Addr, key)
	}
}

// adoptConflict handles an address the allocator thought free but the API
// already records: it marks the address held by the record's owner so it is
// never handed out twice, and reports the disagreement on the pod.
func (l *ledger) adoptConflict(ctx context.Context, pod *corev1.Pod, ls ipam.Lease) error {
	existing, err := l.store.GetLive(ctx, estuaryv1.InstanceName(ls.Addr))
	if err != nil {
		return fmt.Errorf("address %s in subnet %s is already recorded; read the record: %w", ls.Addr, ls.Subnet, err)
	}
	rec, err := record(existing)
	if err != nil {
		return err
	}
	if err := l.alloc.Assign(rec.Subnet, rec.Addr, rec.Owner); err != nil && !errors.Is(err, ipam.ErrInUse) {
		return fmt.Errorf("hold recorded address %s for %s: %w", rec.Addr, rec.Owner, err)
	}
	l.events.Eventf(pod, existing, corev1.EventTypeWarning, "AddressConflict", "Allocate",
		"address %s in subnet %s is already recorded for %s; it is now held for that owner and another address will be chosen", ls.Addr, ls.Subnet, rec.Owner)
	return nil
}

// instance builds the IPInstance that records hd for pod.
func (l *ledger) instance(pod *corev1.Pod, hd holding) *estuaryv1.IPInstance {
	ls := hd.lease
	ipi := &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name: hd.name,
			Labels: map[string]string{
				estuaryv1.LabelNamespace: pod.Namespace,
				estuaryv1.LabelSubnet:    ls.Subnet,
			},
		},
		Spec: estuaryv1.IPInstanceSpec{
			Network: ls.Network,
			Subnet:  ls.Subnet,
			Address: estuaryv1.InstanceAddress{
				IP:      netipPrefix(ls),
				Version: int32(ls.Family.Version()),
				NetID:   l.topo.NetID(ls.Network, ls.Subnet),
			},
			Binding: estuaryv1.Binding{Namespace: pod.Namespace, PodName: pod.Name},
		},
	}
	if ls.Gateway.IsValid() {
		ipi.Spec.Address.Gateway = estuaryv1.IPAddress(ls.Gateway.String())
	}
	// No metadata.ownerReferences: a cluster-scoped record cannot name a
	// namespaced owner for the garbage collector. Records whose pod or owner
	// went while the manager was down are released by the manager itself,
	// on start and by its audit.
	ipi.Spec.Binding.Owner = estuaryv1.OwnerReference{Kind: workload.KindPod, Name: pod.Name, UID: string(pod.UID)}
	if hd.pod == "" {
		hd.pod = pod.Name
	}
	applyHolding(ipi, hd)
	return ipi
}

// applyHolding writes what hd says into ipi: the pod, node, owner,
// retention, reservation, MAC, phase and expiry, and, on a Bound record, the
// pod's address count, so that the node waits for every family the pod is
// given and for no other. The address, network and subnet are the record's
// own and never change.
func applyHolding(ipi *estuaryv1.IPInstance, hd holding) {
	b := &ipi.Spec.Binding
	if hd.pod != "" {
		b.PodName = hd.pod
		setLabel(ipi, estuaryv1.LabelPod, hd.pod)
	}
	b.PodUID, b.NodeName = hd.podUID, hd.node
	setLabel(ipi, estuaryv1.LabelNode, hd.node)
	if hd.owner.Kind != "" {
		b.Owner = estuaryv1.OwnerReference{Kind: hd.owner.Kind, Name: hd.owner.Name, UID: hd.owner.UID}
	}
	b.StatefulOrdinal = nil
	if hd.set != nil {
		b.Owner = estuaryv1.OwnerReference{Kind: hd.set.kind, Name: hd.set.name, UID: hd.set.uid}
		b.StatefulOrdinal = ptr.To(hd.set.ordinal)
	}
	ipi.Spec.Retention = nil
	if hd.retain != nil {
		ipi.Spec.Retention = &estuaryv1.Retention{}
		if hd.retain.ttl != nil {
			ipi.Spec.Retention.TTL = &metav1.Duration{Duration: *hd.retain.ttl}
		}
	}
	if hd.count > 0 && hd.phase == estuaryv1.IPInstanceBound {
		if ipi.Annotations == nil {
			ipi.Annotations = map[string]string{}
		}
		ipi.Annotations[estuaryv1.AnnotationAddresses] = strconv.Itoa(hd.count)
	}
	ipi.Spec.Reserved = hd.reserved
	ipi.Spec.Address.MAC = hd.mac
	ipi.Status.Phase = hd.phase
	ipi.Status.ExpiresAt = nil
	if !hd.expires.IsZero() {
		ipi.Status.ExpiresAt = &metav1.Time{Time: hd.expires}
	}
}

func setLabel(ipi *estuaryv1.IPInstance, k, v string) {
	if v == "" {
		delete(ipi.Labels, k)
		return
	}
	if ipi.Labels == nil {
		ipi.Labels = map[string]string{}
	}
	ipi.Labels[k] = v
}

func addrs(hs []holding) []string {
	out := make([]string, len(hs))
	for i, hd := range hs {
		out[i] = hd.lease.Addr.String()
	}
	return out
}

// The MAC recorded with an address: a stable MAC per kept address. An address that may come back to another
// pod (a StatefulSet's, an Advanced StatefulSet's, a virtual machine's, one
// a retaining workload keeps, one reserved) comes back with the MAC it had:
// the MAC is recorded with the address (spec.address.mac), and the node
// sets the recorded MAC on the pod's interface (package ipwait), as it does
// for mac-address and mac-pool.
//
// The manager chooses it, not the node, so that it is in the record before
// any node plumbs the pod and survives the loss of every node's state: it
// is derived from the pod's address, 0a:58 followed by the four bytes of
// its IPv4 address (the convention of ovn-kubernetes and the CNI bridge
// plugin), or, for a pod without one, the last four bytes of its IPv6
// address. 0a is a locally administered unicast first byte, so it never
// collides with a vendor's MAC; two addresses of one IPv4 network never
// share one, nor two of one IPv6 subnet whose addresses differ only in
// their last 32 bits. Derived from the address, it is the same after a
// record is lost and recovered from the pod's status. A mac-address or
// mac-pool entry wins over it; a pod whose addresses are never kept gets
// no recorded MAC (the kernel chooses one), as before.

// stableMAC is the MAC derived from addrs (see above), or "" when addrs is
// empty.
func stableMAC(addrs []netip.Addr) string {
	i := slices.IndexFunc(addrs, func(a netip.Addr) bool { return family.Of(a) == family.IPv4 })
	if i < 0 {
		i = 0
	}
	if len(addrs) == 0 {
		return ""
	}
	b := addrs[i].As16()
	return net.HardwareAddr{0x0a, 0x58, b[12], b[13], b[14], b[15]}.String()
}

// podMAC is the MAC a pod taking hs gets: fixed (mac-address, mac-pool)
// when set, else the MAC one of hs already records, else the one derived
// from their addresses.
func podMAC(fixed string, hs []holding) string {
	if fixed != "" {
		return fixed
	}
	for _, hd := range hs {
		if hd.mac != "" {
			return hd.mac
		}
	}
	addrs := make([]netip.Addr, len(hs))
	for i, hd := range hs {
		addrs[i] = hd.lease.Addr
	}
	return stableMAC(addrs)
}

// keepsMAC: the addresses of a pod with facts f may be kept for a later
// pod, so they get a stable MAC.
func (f facts) keepsMAC() bool {
	return f.set != nil || f.retain != nil || workload.IsVM(f.owner.Kind)
}
