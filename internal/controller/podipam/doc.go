// Package podipam is the manager's pod address controller: it gives every
// scheduled pod its addresses from pkg/ipam, records each one as an
// IPInstance, and, when the pod is gone, releases them or keeps them for its
// workload as the owner's retention policy says (retention.go): a
// StatefulSet pod's (or an OpenKruise Advanced StatefulSet's, kruise.go) for
// the pod of the same ordinal, which takes back what it asks for now and
// never fewer families (takeback.go), a KubeVirt virtual machine's for the machine
// until it is deleted, handed to its newer pod on live migration (vm.go), a
// retaining pod's of any other workload in the workload's pool (pool.go,
// poolreconciler.go), with an expiry kept in the record. Every address that may be kept records
// a stable MAC (ledger.go). Pods that name their addresses (ip-address, ip-pool) get
// exactly those or wait for them (fixed.go); addresses an administrator
// reserved go only to their workload.
//
// The allocator in memory is the source of truth while the manager leads. It
// is rebuilt from every IPInstance before the first pod is served: read from
// the informer cache, which may be stale after a failover, once a fence has
// proved it current: a write the cache must show, or a live list of the
// records' names and versions, every one the cache holds at another version
// or not at all read live (fence.go). Every allocation is
// persisted with exactly one API write, the IPInstance create. Which
// addresses are free is decided by the allocator's memory alone, never by
// the cache; the cached records serve the rebuild and the audit (both
// fenced), a workload's pool, and the writes of a binding, which read the
// record live when the cache is behind (records.go).
//
// Before a pod gets a new address it must pass the admission webhook's pod
// rules, re-checked here with the same functions of package netmodel so that
// a bypassed or raced webhook cannot make the manager allocate what it would
// have refused: its network and subnet annotations must be valid
// (netmodel.ResolveNetwork; refused with an AllocationFailed event quoting the
// rule), and its node must be inside its Underlay network's domain (the
// network's nodeSelector matches the node's labels; refused with an
// OutsideNetworkDomain event naming the node, the network and the
// selector). A pod asking for an Underlay network by type takes the one
// whose domain holds its node (byNode; a node of none is refused the same
// way), and every pod is read with the cluster's defaults (Defaults). A refused pod is tried again every RetryExhausted, since the
// Networks, Subnets and Node labels that decide it may change. The pod's
// Namespace, whose annotations are part of its selection, is read from the
// cache or, when the cache does not show it, live (namespace.go); a read
// that fails is an error retried with backoff (a NamespaceUnreadable
// event), never a namespace without annotations.
//
// # Who owns what
//
// Setup (setup.go) builds the parts and gives each its own fields; what
// they share is passed to each, never reached through another part:
//
//   - holdings (holdings.go): the in-memory truth of who holds what, per
//     key (keys.go: a pod's namespace/name or a workload's
//     namespace/Kind/name, made and cut apart there alone), with the
//     pending adoptions the audit found. Shared by every part below.
//   - Reconciler (reconciler.go): the pod controller, queued with pod
//     names (reconcile.Request). A pod's allocation reads top to bottom:
//     reconciler.go, selection.go (planner: namespace, admission, owner,
//     request), vm.go, fixed.go (fixedClaims), pool.go (what the workload
//     keeps), the allocator, ledger.go (the records written). complete.go
//     and takeback.go serve pods that hold addresses already.
//   - poolReconciler (poolreconciler.go): the pool controller, a typed
//     controller (reconcile.TypedReconciler[workload.Ref]) queued with
//     workloads by the IPInstance watch, the ledger, the optional watches
//     and the audit; it settles what workloads keep.
//   - ledger (ledger.go, records.go, moves.go): the one writer of
//     IPInstances, through recordStore (store.go: six methods, clientStore
//     over the controller-runtime client), record first and memory after.
//   - retainer (retention.go, kruise.go): the retention rules, what a gone
//     pod's addresses become and when a workload's kept ones go.
//   - queues (queues.go): requests to either controller from outside an
//     event, and the pods waiting for an address.
//   - rebuilder (ready.go) and recordReader (fence.go): the rebuild on
//     taking the lead, gating every other part (readiness); auditor
//     (audit.go); StatusWriter and Metrics (status.go, metrics.go);
//     Topology with the network and subnet controllers (topology.go);
//     optionalWatches (optional.go).
package podipam
