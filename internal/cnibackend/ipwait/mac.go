package ipwait

import (
	"fmt"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// recordMAC is the MAC the record pins for its pod's interface
// (spec.address.mac): zero when it pins none. The API server's schema
// already asks for six lowercase hex pairs; the node checks again, and also
// that the address is unicast, before it gives it to a pod.
func recordMAC(ipi *estuaryv1.IPInstance) (desired.MAC, error) {
	s := ipi.Spec.Address.MAC
	if s == "" {
		return desired.MAC{}, nil
	}
	m, err := desired.ParseMAC(s)
	switch {
	case err != nil:
		return desired.MAC{}, fmt.Errorf("ipinstance %s: spec.address.mac: %w", ipi.Name, err)
	case m.String() != s:
		return desired.MAC{}, fmt.Errorf("ipinstance %s: spec.address.mac: %q is not of the form aa:bb:cc:dd:ee:ff (lowercase)",
			ipi.Name, s)
	case m.IsZero():
		return desired.MAC{}, fmt.Errorf("ipinstance %s: spec.address.mac: %s is not a usable interface address", ipi.Name, s)
	case m.IsMulticast():
		return desired.MAC{}, fmt.Errorf("ipinstance %s: spec.address.mac: %s is a multicast address; a pod's interface needs a unicast one",
			ipi.Name, s)
	}
	return m, nil
}

// sameMAC checks that the records of one pod pin the same MAC for its
// interface, or none of them does.
func sameMAC(records []estuaryv1.IPInstance) error {
	for i := 1; i < len(records); i++ {
		first, other := &records[0], &records[i]
		if first.Spec.Address.MAC != other.Spec.Address.MAC {
			return fmt.Errorf("ipinstance %s: spec.address.mac is %s, but ipinstance %s of the same pod has %s; "+
				"every address of a pod must pin the same MAC or none", other.Name, macOrNone(other.Spec.Address.MAC),
				first.Name, macOrNone(first.Spec.Address.MAC))
		}
	}
	return nil
}

func macOrNone(s string) string {
	if s == "" {
		return "unset"
	}
	return fmt.Sprintf("%q", s)
}
