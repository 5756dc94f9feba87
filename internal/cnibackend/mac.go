package cnibackend

import (
	"fmt"

	"github.com/estuary-cni/estuary/internal/cnibackend/ipwait"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// pinnedMAC is the MAC addrs pin for the pod's interface: zero when none
// does. Addresses that disagree (one pins a MAC the other does not, or
// two pin different ones) and a multicast MAC are errors.
func pinnedMAC(addrs []ipwait.Address) (desired.MAC, error) {
	if len(addrs) == 0 {
		return desired.MAC{}, nil
	}
	mac := addrs[0].MAC
	for _, a := range addrs[1:] {
		if a.MAC != mac {
			return desired.MAC{}, fmt.Errorf("addresses %s and %s pin different MACs for the pod's interface (%s and %s)",
				addrs[0].IP, a.IP, macOrNone(mac), macOrNone(a.MAC))
		}
	}
	if mac.IsMulticast() {
		return desired.MAC{}, fmt.Errorf("address %s pins MAC %s, a multicast address; a pod's interface needs a unicast one",
			addrs[0].IP, mac)
	}
	return mac, nil
}

func macOrNone(m desired.MAC) string {
	if m.IsZero() {
		return "none"
	}
	return m.String()
}
