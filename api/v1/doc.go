// Package v1 holds the networking.estuary.io/v1 API: the Network, Subnet and
// IPInstance types and the kubebuilder markers from which their CRDs, with
// printer columns and CEL validation, are generated.
//
// Object-local rules (canonical CIDRs, ranges inside the CIDR, mode consistent
// with type, immutable fields) live here as CEL; rules that need other objects
// (overlaps, parents that must exist, guarded deletes) belong to the webhook.
//
// +kubebuilder:object:generate=true
// +groupName=networking.estuary.io
package v1
