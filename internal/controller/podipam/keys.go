package podipam

// Keys. Every address is held under one key, which is also its owner in the
// allocator: a pod's namespace/name while a pod uses it (and while a
// StatefulSet keeps it for the pod of the same name), or its workload's
// namespace/Kind/name (workload.Ref.Key) while it is kept or reserved for
// any pod of the workload. A pod name never has a slash, so the two never
// meet. This file is the one place a key is made or cut apart: the pod
// controller is queued with a pod's types.NamespacedName and the pool
// controller with a workload.Ref, never with a key.

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/workload"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// ownerKey is the key of a pod's addresses: namespace/name, which stays
// the same when a StatefulSet pod is replaced.
func ownerKey(namespace, pod string) string { return namespace + "/" + pod }

// podKey is ownerKey of a pod's name.
func podKey(nn types.NamespacedName) string { return ownerKey(nn.Namespace, nn.Name) }

// splitKey is the namespace of a key and the rest of it (a pod's name, or
// a workload's Kind/name).
func splitKey(key string) (namespace, rest string) {
	namespace, rest, _ = strings.Cut(key, "/")
	return namespace, rest
}

// podOf is the pod name of a pod key; ok is false for a workload's key.
func podOf(key string) (nn types.NamespacedName, ok bool) {
	if _, isPool := poolOf(key); isPool {
		return types.NamespacedName{}, false
	}
	ns, name := splitKey(key)
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// poolOf is the workload of a workload's key; ok is false for a pod key.
func poolOf(key string) (workload.Ref, bool) { return workload.ParseKey(key) }

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

// recordKey is the key hd's record is held under once it says what hd says
// (see recordKey of an IPInstance); key is the pod key hd is written for.
func (hd holding) recordKey(key string) string {
	ns, pod := splitKey(key)
	kind, name := hd.owner.Kind, hd.owner.Name
	if hd.set != nil {
		kind, name = hd.set.kind, hd.set.name
	}
	if kind != "" && name != "" && workload.Pooled(hd.phase, kind) {
		return workload.Ref{Namespace: ns, Kind: kind, Name: name}.Key()
	}
	if hd.pod != "" {
		pod = hd.pod
	}
	return ownerKey(ns, pod)
}

// keyNamespace is the namespace of a key.
func keyNamespace(key string) string {
	ns, _ := splitKey(key)
	return ns
}

// isPool: key is a workload's.
func isPool(key string) bool {
	_, ok := poolOf(key)
	return ok
}

// poolRequest is the pool controller's request for pool: its namespace,
// kind and name (a UID is no part of a pool's identity).
func poolRequest(pool workload.Ref) workload.Ref {
	return workload.Ref{Namespace: pool.Namespace, Kind: pool.Kind, Name: pool.Name}
}
