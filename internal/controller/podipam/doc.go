// Package podipam is the manager's pod address controller: it gives every
// scheduled pod its addresses from pkg/ipam, records each one as an
// IPInstance, releases them when the pod is gone, and keeps a StatefulSet
// pod's addresses for the pod that replaces it.
//
// The allocator in memory is the source of truth while the manager leads. It
// is rebuilt from a live list of IPInstances (never from the informer cache,
// which may be stale after a failover) before the first pod is served, and
// every allocation is persisted with exactly one API write, the IPInstance
// create. The informer cache is read only for pods, namespaces and
// StatefulSets.
package podipam
