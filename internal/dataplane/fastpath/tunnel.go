package fastpath

import (
	"encoding/binary"
	"errors"
	"net/netip"
)

// TunnelDevice is a VXLAN device of the node as the program encapsulates
// and decapsulates for it: the device's own settings, so its packets and
// the program's are the same on the wire. The devices are named; the
// Attacher resolves them into a Tunnel.
type TunnelDevice struct {
	Device string     // the VXLAN device
	Parent string     // the device it sends through
	VNI    uint32     //
	Port   uint16     // UDP destination port
	Local  netip.Addr // its VTEP address (IPv4): the outer source
	MAC    [6]byte    // its MAC
	MTU    int        // its MTU
}

// Tunnel is a TunnelDevice with its devices' ifindexes.
type Tunnel struct {
	TunnelDevice
	Ifindex, ParentIndex int
}

// VTEP is a remote node's tunnel endpoint: its device's MAC and address.
type VTEP struct {
	MAC [6]byte
	IP  netip.Addr
}

// SetTunnel makes the tunnel maps hold t and its remote VTEPs, or nothing
// when t is nil. Only an IPv4 underlay is done by the program; a tunnel with
// an IPv6 VTEP address is left entirely to its device, as are VTEPs that are
// not IPv4.
func (p *Program) SetTunnel(t *Tunnel, vteps []VTEP) error {
	tunnels := map[uint32]fastpathTunnel{}
	vnis := map[uint32]uint32{}
	remotes := map[fastpathVtepKey]fastpathVtep{}
	if t != nil && t.Local.Unmap().Is4() && t.Ifindex > 0 && t.ParentIndex > 0 {
		idx := uint32(t.Ifindex)
		tunnels[idx] = fastpathTunnel{
			Local: be32(t.Local), Vni: t.VNI, Parent: uint32(t.ParentIndex), Mtu: uint32(t.MTU),
			Port: be16(t.Port), Mac: t.MAC,
		}
		vnis[t.VNI] = idx
		for _, v := range vteps {
			if v.IP.Unmap().Is4() {
				remotes[fastpathVtepKey{Ifindex: idx, Mac: v.MAC}] = fastpathVtep{Ip: be32(v.IP)}
			}
		}
	}
	// Remotes and VNIs first, the tunnel last: the program looks a tunnel
	// up before the rest, so it never meets a tunnel without its VTEPs.
	err := errors.Join(syncMap(p.objs.Vteps, remotes, "vteps"), syncMap(p.objs.TunnelVnis, vnis, "tunnel_vnis"))
	if err != nil {
		return err
	}
	return syncMap(p.objs.Tunnels, tunnels, "tunnels")
}

// be32 is an IPv4 address as the program compares it: in network order in
// memory, read as a host-order integer.
func be32(a netip.Addr) uint32 {
	b := a.Unmap().As4()
	return binary.NativeEndian.Uint32(b[:])
}

// be16 is a port in network order in memory.
func be16(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
