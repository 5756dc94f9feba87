package podipam

import (
	"fmt"
	"net/netip"
	"strings"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/workload"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// record turns an IPInstance into the allocator's record of it.
func record(ipi *estuaryv1.IPInstance) (ipam.Record, error) {
	p, err := netip.ParsePrefix(ipi.Spec.Address.IP)
	if err != nil {
		return ipam.Record{}, fmt.Errorf("ipinstance %s: spec.address.ip: %w", ipi.Name, err)
	}
	state := ipam.Allocated
	if ipi.Status.Phase == estuaryv1.IPInstanceRetained {
		state = ipam.Retained
	}
	if ipi.Status.Phase == estuaryv1.IPInstanceReserved {
		state = ipam.Retained
	}
	return ipam.Record{Subnet: ipi.Spec.Subnet, Addr: p.Addr(), State: state, Owner: recordKey(ipi)}, nil
}

// recordKey is the key an IPInstance's address is held under: the pod's
// (namespace/name) while a pod uses it, and while a StatefulSet keeps it
// for the pod of the same name; its workload's (namespace/Kind/name) while
// it is kept for, or reserved for, any pod of the workload.
func recordKey(ipi *estuaryv1.IPInstance) string {
	if pool, ok := workload.PoolOf(ipi); ok {
		return pool.Key()
	}
	return ownerKey(ipi.Spec.Binding.Namespace, ipi.Spec.Binding.PodName)
}

// ownerKey is the allocator owner of a pod's addresses: namespace/name, which
// stays the same when a StatefulSet pod is replaced.
func ownerKey(namespace, pod string) string { return namespace + "/" + pod }

// splitKey is the namespace and pod name of an owner key.
func splitKey(key string) (namespace, pod string) {
	namespace, pod, _ = strings.Cut(key, "/")
	return namespace, pod
}
