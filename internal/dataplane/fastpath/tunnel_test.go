package fastpath_test

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/fastpath"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/nstest/nspod"
)

// vnode is an overlay node: a namespace with an underlay link (ul0), a
// kernel VXLAN device set up as the overlay agent sets up estuary's (no
// learning, an FDB entry and neighbour entries for the other node's pods)
// and one pod.
type vnode struct {
	host, pod, veth string
	ul, pod4, pod6  string
	mtu             int // the tunnel's: tunMTU, 20 less over IPv6
	mac             [6]byte
	tc              *ops.TC
}

const (
	tunDev   = "estvx4"
	tunMTU   = 1450
	tunSub4  = "10.245.0.0/16"
	tunSub6  = "fd00:245::/32"
	tunVNI   = 4
	tunPortN = 8472
)

func newVNode(t *testing.T, i int, ul6 bool) *vnode {
	ul, mtu := fmt.Sprintf("192.168.77.%d", i), tunMTU
	if ul6 {
		ul, mtu = fmt.Sprintf("fd00:77::%d", i), tunMTU-20
	}
	n := &vnode{
		host: nstest.New(t), ul: ul, mtu: mtu,
		pod4: fmt.Sprintf("10.245.%d.2", i), pod6: fmt.Sprintf("fd00:245:%d::2", i),
		mac: [6]byte{0x02, 0xee, 0, 0, 0, byte(i)},
	}
	n.tc = router(t, n.host)
	n.pod, n.veth = nspod.Plumb(t, n.host, "p",
		netip.MustParseAddr(n.pod4),
		netip.MustParseAddr(n.pod6))
	nstest.IP(t, n.pod, "link", "set", "eth0", "mtu", fmt.Sprint(n.mtu))
	nstest.IP(t, n.host, "link", "set", n.veth, "mtu", fmt.Sprint(n.mtu))
	return n
}

func macString(m [6]byte) string {
	return net.HardwareAddr(m[:]).String()
}

// tunnelPair links two overlay nodes by an IPv4 underlay veth pair and
// makes each one's VXLAN device reach the other's pod.
func tunnelPair(t *testing.T) (a, b *vnode) { return tunnelPairOver(t, false) }

// tunnelPairOver is tunnelPair over an IPv6 underlay when ul6 is set.
func tunnelPairOver(t *testing.T, ul6 bool) (a, b *vnode) {
	nstest.RequireRoot(t)
	a, b = newVNode(t, 1, ul6), newVNode(t, 2, ul6)
	nstest.IP(t, a.host, "link", "add", "ul0", "type", "veth", "peer", "name", "ul0", "netns", filepath.Base(b.host))
	bits := "/24"
	if ul6 {
		bits = "/64"
	}
	for _, n := range []*vnode{a, b} {
		nstest.IP(t, n.host, "addr", "add", n.ul+bits, "dev", "ul0", "nodad")
		nstest.IP(t, n.host, "link", "set", "ul0", "up")
		nstest.IP(t, n.host, "link", "add", tunDev, "type", "vxlan", "id", fmt.Sprint(tunVNI), "dstport", fmt.Sprint(tunPortN),
			"local", n.ul, "dev", "ul0", "nolearning")
		nstest.IP(t, n.host, "link", "set", tunDev, "address", macString(n.mac), "mtu", fmt.Sprint(n.mtu), "up")
	}
	for _, p := range [][2]*vnode{{a, b}, {b, a}} {
		n, r := p[0], p[1]
		nstest.Exec(t, n.host, "bridge", "fdb", "append", macString(r.mac), "dev", tunDev, "dst", r.ul)
		nstest.Exec(t, n.host, "bridge", "fdb", "append", "00:00:00:00:00:00", "dev", tunDev, "dst", r.ul)
		nstest.IP(t, n.host, "route", "add", r.pod4+"/32", "dev", tunDev)
		nstest.IP(t, n.host, "-6", "route", "add", r.pod6+"/128", "dev", tunDev)
		nstest.IP(t, n.host, "neigh", "add", r.pod4, "lladdr", macString(r.mac), "dev", tunDev)
		nstest.IP(t, n.host, "-6", "neigh", "add", r.pod6, "lladdr", macString(r.mac), "dev", tunDev)
		// As the overlay agent does: the node answers for its pod on the device.
		nstest.IP(t, n.host, "neigh", "add", "proxy", n.pod4, "dev", tunDev)
	}
	return a, b
}

func (n *vnode) desired(peer *vnode) fastpath.Desired {
	return fastpath.Desired{
		Devices: []string{tunDev, "ul0"},
		Pods:    []string{n.veth},
		Subnets: []fastpath.Subnet{{CIDR: netip.MustParsePrefix(tunSub4)}, {CIDR: netip.MustParsePrefix(tunSub6)}},
		Tunnel: &fastpath.TunnelDevice{Device: tunDev, Parent: "ul0", VNI: tunVNI, Port: tunPortN,
			Local: netip.MustParseAddr(n.ul), MAC: n.mac, MTU: n.mtu},
		VTEPs: []fastpath.VTEP{{MAC: peer.mac, IP: netip.MustParseAddr(peer.ul)}},
	}
}

func (n *vnode) load(t *testing.T, peer *vnode) *fastpath.Program {
	t.Helper()
	return attach(t, n.tc, n.desired(peer))
}

// Both nodes encapsulate in the program; small packets (ACKs, echoes) are
// decapsulated by it too, GRO aggregates by the device.
func TestTunnelEncapsulatedAndDecapsulatedByTheProgram(t *testing.T) {
	a, b := tunnelPair(t)
	pa, pb := a.load(t, b), b.load(t, a)
	server(t, b.pod, b.pod4+":5003")
	server(t, b.pod, "["+b.pod6+"]:5003")
	for _, c := range []struct{ name, dst, want string }{
		{"IPv4", b.pod4 + ":5003", a.pod4},
		{"IPv6 over an IPv4 underlay", "[" + b.pod6 + "]:5003", a.pod6},
	} {
		t.Run(c.name, func(t *testing.T) {
			sa, sb := stats(t, pa), stats(t, pb)
			if peer := transfer(t, a.pod, c.dst, size); peer != c.want {
				t.Errorf("pod b saw %s; want pod a's own %s", peer, c.want)
			}
			da, db := delta(sa, stats(t, pa)), delta(sb, stats(t, pb))
			if da.Encap < 50 || db.Encap < 10 || da.Decap < 10 || da.RedirectPeer < 10 {
				t.Errorf("node a %+v, node b %+v; want the data and the ACKs encapsulated by the program, "+
					"the ACKs decapsulated by it into pod a", da, db)
			}
		})
	}
	t.Run("ping", func(t *testing.T) {
		sa, sb := stats(t, pa), stats(t, pb)
		ping(t, a.pod, b.pod4)
		da, db := delta(sa, stats(t, pa)), delta(sb, stats(t, pb))
		if da.Encap < 5 || db.Decap < 5 || db.Encap < 5 || da.Decap < 5 {
			t.Errorf("node a %+v, node b %+v; want 5 echoes and 5 replies encapsulated and decapsulated by the program", da, db)
		}
	})
}

// The program's packets are the kernel device's: a node without the program
// receives and answers them, and the program takes the device's packets.
func TestTunnelInteroperatesWithTheKernelDevice(t *testing.T) {
	a, b := tunnelPair(t)
	pa := a.load(t, b)
	server(t, b.pod, b.pod4+":5004")
	server(t, a.pod, a.pod4+":5004")
	sa := stats(t, pa)
	if peer := transfer(t, a.pod, b.pod4+":5004", size); peer != a.pod4 {
		t.Errorf("pod b saw %s; want %s", peer, a.pod4)
	}
	if peer := transfer(t, b.pod, a.pod4+":5004", size); peer != b.pod4 {
		t.Errorf("pod a saw %s; want %s", peer, b.pod4)
	}
	ping(t, b.pod, a.pod6)
	if d := delta(sa, stats(t, pa)); d.Encap < 50 || d.Decap < 10 {
		t.Errorf("node a %+v; want its sends encapsulated and the kernel device's small packets decapsulated by the program", d)
	}
}

// An IPv6 underlay is left to the kernel's device (the program encapsulates
// over IPv4 only): with the program on every device, the pods of IPv6-only
// nodes still reach each other over an IPv6 tunnel, and the program
// neither encapsulates nor decapsulates a packet. (IPv4 pods over an IPv6
// tunnel are only pinged: between veths, the kernel's device alone
// delivers their TCP segments with a bad checksum, program or not.)
func TestTunnelOverAnIPv6UnderlayIsLeftToTheDevice(t *testing.T) {
	a, b := tunnelPairOver(t, true)
	pa, pb := a.load(t, b), b.load(t, a)
	server(t, b.pod, "["+b.pod6+"]:5005")
	sa, sb := stats(t, pa), stats(t, pb)
	if peer := transfer(t, a.pod, "["+b.pod6+"]:5005", size); peer != a.pod6 {
		t.Errorf("pod b saw %s; want pod a's own %s", peer, a.pod6)
	}
	ping(t, a.pod, b.pod6)
	ping(t, b.pod, a.pod4)
	da, db := delta(sa, stats(t, pa)), delta(sb, stats(t, pb))
	if da.Encap != 0 || db.Encap != 0 || da.Decap != 0 || db.Decap != 0 {
		t.Errorf("node a %+v, node b %+v; want nothing encapsulated or decapsulated by the program", da, db)
	}
	if da.PassOther+da.PassConntrack+da.PassRoute+da.RedirectNeigh+da.RedirectPeer == 0 {
		t.Errorf("node a %+v; the program saw none of the pods' packets", da)
	}
}
