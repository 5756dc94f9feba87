package podipam

// A stable MAC per kept address. An address that may come back to another
// pod (a StatefulSet's, an Advanced StatefulSet's, a virtual machine's, one
// a retaining workload keeps, one reserved) comes back with the MAC it had:
// the MAC is recorded with the address (spec.address.mac), and the node
// sets the recorded MAC on the pod's interface (package ipwait), as it does
// for mac-address and mac-pool.
//
// The manager chooses it, not the node, so that it is in the record before
// any node plumbs the pod and survives the loss of every node's state: it
// is derived from the pod's address, 0a:58 followed by the four bytes of
// its IPv4 address (the convention of ovn-kubernetes and the CNI bridge
// plugin), or, for a pod without one, the last four bytes of its IPv6
// address. 0a is a locally administered unicast first byte, so it never
// collides with a vendor's MAC; two addresses of one IPv4 network never
// share one, nor two of one IPv6 subnet whose addresses differ only in
// their last 32 bits. Derived from the address, it is the same after a
// record is lost and recovered from the pod's status. A mac-address or
// mac-pool entry wins over it; a pod whose addresses are never kept gets
// no recorded MAC (the kernel chooses one), as before.

import (
	"net"
	"net/netip"
	"slices"

	"github.com/estuary-cni/estuary/internal/workload"
	"github.com/estuary-cni/estuary/pkg/family"
)

// stableMAC is the MAC derived from addrs (see above), or "" when addrs is
// empty.
func stableMAC(addrs []netip.Addr) string {
	i := slices.IndexFunc(addrs, func(a netip.Addr) bool { return family.Of(a) == family.IPv4 })
	if i < 0 {
		i = 0
	}
	if len(addrs) == 0 {
		return ""
	}
	b := addrs[i].As16()
	return net.HardwareAddr{0x0a, 0x58, b[12], b[13], b[14], b[15]}.String()
}

// podMAC is the MAC a pod taking hs gets: fixed (mac-address, mac-pool)
// when set, else the MAC one of hs already records, else the one derived
// from their addresses.
func podMAC(fixed string, hs []holding) string {
	if fixed != "" {
		return fixed
	}
	for _, hd := range hs {
		if hd.mac != "" {
			return hd.mac
		}
	}
	addrs := make([]netip.Addr, len(hs))
	for i, hd := range hs {
		addrs[i] = hd.lease.Addr
	}
	return stableMAC(addrs)
}

// keepsMAC: the addresses of a pod with facts f may be kept for a later
// pod, so they get a stable MAC.
func (f facts) keepsMAC() bool {
	return f.set != nil || f.retain != nil || workload.IsVM(f.owner.Kind)
}
