package netmodel

import (
	"fmt"
)

// Kinds as they appear in denials.
const (
	KindNetwork    = "network"
	KindSubnet     = "subnet"
	KindPod        = "pod"
	KindIPInstance = "ipinstance"
)

// Denial is one broken admission rule: the object refused, the field at
// fault (empty for a refused delete) and the reason, which names any other
// object involved.
type Denial struct {
	// Kind is the lower-case kind of the refused object: network, subnet
	// or pod.
	Kind string
	// Name is the object's name, namespace/name for a pod.
	Name string
	// Field is the path of the offending field, e.g. spec.range.cidr or
	// metadata.annotations[networking.estuary.io/network].
	Field string
	// Reason says what is wrong, starting with the field's value where
	// there is one.
	Reason string
}

// Error formats the denial as `kind "name": field reason`.
func (d *Denial) Error() string {
	if d.Field == "" {
		return fmt.Sprintf("%s %q: %s", d.Kind, d.Name, d.Reason)
	}
	return fmt.Sprintf("%s %q: %s %s", d.Kind, d.Name, d.Field, d.Reason)
}

// Deny returns the Denial of object kind/name at field, its reason
// formatted from format and args.
func Deny(kind, name, field, format string, args ...any) *Denial {
	return &Denial{Kind: kind, Name: name, Field: field, Reason: fmt.Sprintf(format, args...)}
}
