// Package cnibackend owns the orchestration of a pod's attachment on this node:
// Backend is the CNI server's backend (cniserver.Backend), LocalPods the
// data-path loop's local-pods part (datapath.LocalPods) and Recovery the
// rebuilding of the endpoint records at start. The CNI server validates a
// request, serialises it per container and records its endpoint; Backend
// runs it, in order: it resolves the pod's addresses (Addresses, the
// ipwait.Waiter), plumbs its interface (podnet, on plain values), checks
// its addresses on the node's networks (Readiness, segment.Checks) and
// answers in CNI terms.
//
// # Design
//
// Failure reasons. Every error of Backend carries its cniserver.Reason, so
// the server's metrics and the runtime's message say why an ADD failed:
// records that cannot be used are ipam_refused, no records within
// AddressTimeout ipam_timeout (bgp_session when the wait was for the
// node's BGP sessions, an ipwait.SessionError), a runtime that gave up
// first canceled, a pod namespace that cannot be opened netns, the kernel
// dataplane, a failed segment check segment_check, a CHECK that finds
// something missing mismatch. Every error names the pod.
//
// Pinned MAC. When the pod's records fix a MAC for its interface
// (ipwait.Address.MAC), the pod side is created with it and reported with
// it; otherwise the kernel chooses it. Addresses that disagree on it fail
// Add before anything is made (mac.go).
//
// MTU. A pod whose addresses are all on Underlay networks gets UnderlayMTU
// (its packets carry no tunnel header); any other gets MTU, which fits the
// tunnel.
//
// Nothing left behind. Readiness runs once the pod's interface works (its
// host route exists), so a probe on the segment can be answered. When
// plumbing or readiness fails, the pair Add created is deleted again
// (removing the pair removes its routes and neighbours with it). A
// repeated Add returns the same reply.
//
// Recovery (recover.go). The state file is a cache of the pod interfaces
// the node built, not their only record: podnet finds them in the kernel,
// and this node's Bound IPInstances name their pods.
package cnibackend
