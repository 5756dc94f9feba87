package webhook

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Kinds as they appear in denials.
const (
	kindNetwork    = "network"
	kindSubnet     = "subnet"
	kindPod        = "pod"
	kindIPInstance = "ipinstance"
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

func deny(kind, name, field, format string, args ...any) *Denial {
	return &Denial{Kind: kind, Name: name, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// selectorString formats a label selector as {k1=v1,k2=v2}, keys sorted.
func selectorString(sel map[string]string) string {
	keys := slices.Sorted(maps.Keys(sel))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+sel[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}
