// Package ipam is estuary's IP address allocator.
//
// It owns the allocation state of every subnet the node or cluster hands addresses
// from: which address is allocated or retained, by which owner, where the next-fit
// search continues, and how many addresses are left. It knows nothing about
// Kubernetes: the manager that persists allocations as API objects feeds them back
// with [Allocator.Rebuild] after a restart and exports them with
// [Allocator.Records]. It depends on the standard library only.
//
// # Model
//
// A subnet ([SubnetConfig]) is an IPv4 prefix of any length or an IPv6 prefix of
// length 64 or more, belonging to one network. Within the prefix the allocatable
// window is [Start, End]; the network address, the IPv4 broadcast address, the
// gateway and the excluded ranges are never handed out, not even on explicit
// request. Reserved ranges are skipped by next-fit allocation but may be assigned
// explicitly with [Allocator.Assign].
//
// Every held address is either allocated or retained. A retained address stays
// held for its owner: it is not free, and an Assign of the same address by the
// same owner turns it back into an allocation.
//
// Allocation is next-fit: the search starts just after the last address handed out
// and wraps around to Start, so a released address is not reused before the
// window wraps.
//
// [Allocator.Allocate] serves a [Request] for one or both families in one
// transaction. For each family it tries the subnets the request lists for it,
// in the order listed, or else the network's non-private subnets of that
// family in ascending order of subnet name, and takes the first with a free
// address.
//
// # Concurrency
//
// An [Allocator] is safe for concurrent use. Each subnet has its own mutex; the set
// of subnets and networks is an immutable index read through an atomic pointer, so
// the allocation path takes no allocator-wide lock. See subnet.go for the design
// of the per-subnet data structure.
//
// # Errors
//
// Errors are *[Error] values (or wrap one) whose kind is one of the sentinel errors
// such as [ErrExhausted] or [ErrInUse], usable with errors.Is. [Allocator.Rebuild]
// returns a *[RebuildError] listing every problem it found.
package ipam
