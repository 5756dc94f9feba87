package ops

// Listings: every object of a family in the namespace, whoever wrote it, as
// plain values. Read lists what estuary reconciles, in the desired package's
// terms; a listing keeps what a person reading a support bundle needs, and
// the node snapshot (internal/nodesnap) renders it in iproute2's words.

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// LinkRecord is a link as a listing sees it.
type LinkRecord struct {
	Index       int
	Name        string
	Type        string // the kernel's kind: veth, vxlan, bridge, ...
	MTU         int
	OperState   string
	Flags       net.Flags
	MAC         net.HardwareAddr
	MasterIndex int
	ParentIndex int
	NetNsID     int // the peer's namespace id; negative when none
	Alias       string
	VXLAN       *VXLANRecord
	VLAN        *VLANRecord
	// VLANFiltering is a bridge's vlan_filtering, nil when not a bridge
	// or not reported.
	VLANFiltering *bool
	XDP           *XDPRecord // an attached XDP program
}

// VXLANRecord is what a VXLAN link adds.
type VXLANRecord struct {
	VNI, Port int
	Local     net.IP
	DevIndex  int
	Learning  bool
}

// VLANRecord is what an 802.1Q link adds.
type VLANRecord struct {
	ID       int
	Protocol string
}

// XDPRecord is an XDP program attached to a link.
type XDPRecord struct {
	ProgID, Mode uint32
}

// Records lists every link with its attributes.
func (h *Links) Records() ([]LinkRecord, error) {
	ls, err := retryDump("links", h.nl.LinkList)
	if err != nil {
		return nil, err
	}
	out := make([]LinkRecord, 0, len(ls))
	for _, l := range ls {
		out = append(out, linkRecord(l))
	}
	return out, nil
}

func linkRecord(l netlink.Link) LinkRecord {
	a := l.Attrs()
	r := LinkRecord{
		Index: a.Index, Name: a.Name, Type: l.Type(), MTU: a.MTU, OperState: a.OperState.String(),
		Flags: a.Flags, MAC: a.HardwareAddr, MasterIndex: a.MasterIndex, ParentIndex: a.ParentIndex,
		NetNsID: a.NetNsID, Alias: a.Alias,
	}
	switch t := l.(type) {
	case *netlink.Vxlan:
		r.VXLAN = &VXLANRecord{VNI: t.VxlanId, Port: t.Port, Local: t.SrcAddr, DevIndex: t.VtepDevIndex, Learning: t.Learning}
	case *netlink.Vlan:
		r.VLAN = &VLANRecord{ID: t.VlanId, Protocol: t.VlanProtocol.String()}
	case *netlink.Bridge:
		r.VLANFiltering = t.VlanFiltering
	}
	if x := a.Xdp; x != nil && x.Attached {
		r.XDP = &XDPRecord{ProgID: x.ProgId, Mode: x.AttachMode}
	}
	return r
}

// Names maps the namespace's link indexes to names (a lean dump).
func (h *Links) Names() (map[int]string, error) {
	l, err := h.links()
	if err != nil {
		return nil, err
	}
	return l.byIndex, nil
}

// AddrRecord is an address as a listing sees it.
type AddrRecord struct {
	LinkIndex int
	IPNet     *net.IPNet
	Peer      *net.IPNet
	Scope     int
	Flags     int // IFA_F_*
	Label     string
}

// Records lists every address of both families.
func (h *Addrs) Records() ([]AddrRecord, error) {
	as, err := retryDump("addresses", func() ([]netlink.Addr, error) { return h.nl.AddrList(nil, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, err
	}
	out := make([]AddrRecord, 0, len(as))
	for _, a := range as {
		out = append(out, AddrRecord{LinkIndex: a.LinkIndex, IPNet: a.IPNet, Peer: a.Peer, Scope: a.Scope, Flags: a.Flags, Label: a.Label})
	}
	return out, nil
}

// PortRange is a rule's inclusive port range.
type PortRange struct{ Start, End uint16 }

// RuleRecord is a policy rule as a listing sees it.
type RuleRecord struct {
	Family            int // AF_INET or AF_INET6
	Priority          int
	Invert            bool
	Src, Dst          *net.IPNet
	Mark              uint32
	Mask              *uint32
	IifName, OifName  string
	IPProto           int
	Dport, Sport      *PortRange
	Goto              int
	Type              uint8 // FR_ACT_*
	Table             int
	SuppressPrefixlen int
	Protocol          uint8
}

// Records lists the policy rules of both families, IPv4's first.
func (h *Rules) Records() ([]RuleRecord, error) {
	var out []RuleRecord
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := retryDump("rules", func() ([]netlink.Rule, error) { return h.nl.RuleList(fam) })
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			out = append(out, RuleRecord{
				Family: fam, Priority: r.Priority, Invert: r.Invert, Src: r.Src, Dst: r.Dst, Mark: r.Mark, Mask: r.Mask,
				IifName: r.IifName, OifName: r.OifName, IPProto: r.IPProto, Dport: portRange(r.Dport), Sport: portRange(r.Sport),
				Goto: r.Goto, Type: r.Type, Table: r.Table, SuppressPrefixlen: r.SuppressPrefixlen, Protocol: r.Protocol,
			})
		}
	}
	return out, nil
}

func portRange(p *netlink.RulePortRange) *PortRange {
	if p == nil {
		return nil
	}
	return &PortRange{p.Start, p.End}
}

// RouteRecord is a route as a listing sees it.
type RouteRecord struct {
	Family    int // AF_INET or AF_INET6
	Table     int
	Type      int // RTN_*
	Dst       *net.IPNet
	Gw        net.IP
	Via       string // a gateway of another family, "" when none
	LinkIndex int
	MultiPath []NexthopRecord
	Protocol  int
	Scope     int
	Src       net.IP
	Priority  int
	Flags     int // RTNH_F_*
	MTU       int
}

// NexthopRecord is one path of a multipath route.
type NexthopRecord struct {
	Gw        net.IP
	LinkIndex int
	Hops      int
}

// Records lists the routes of every table and both families, IPv4's first.
func (h *Routes) Records() ([]RouteRecord, error) {
	var out []RouteRecord
	err := h.each(func(fam int, r netlink.Route) {
		rec := RouteRecord{
			Family: fam, Table: r.Table, Type: r.Type, Dst: r.Dst, Gw: r.Gw, LinkIndex: r.LinkIndex,
			Protocol: int(r.Protocol), Scope: int(r.Scope), Src: r.Src, Priority: r.Priority, Flags: r.Flags, MTU: r.MTU,
		}
		if r.Via != nil {
			rec.Via = r.Via.String()
		}
		for _, nh := range r.MultiPath {
			rec.MultiPath = append(rec.MultiPath, NexthopRecord{Gw: nh.Gw, LinkIndex: nh.LinkIndex, Hops: nh.Hops})
		}
		out = append(out, rec)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// NeighRecord is a neighbour or FDB entry as a listing sees it.
type NeighRecord struct {
	IP          net.IP
	LinkIndex   int
	MAC         net.HardwareAddr
	State       int // NUD_*
	Flags       int // NTF_*
	Proxy       bool
	Vlan, VNI   int
	MasterIndex int
}

// Records lists the neighbour entries, dynamic and proxy, of both families.
func (h *Neighs) Records() ([]NeighRecord, error) {
	var out []NeighRecord
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		for _, list := range []struct {
			proxy bool
			get   func(int, int) ([]netlink.Neigh, error)
		}{{false, h.nl.NeighList}, {true, h.nl.NeighProxyList}} {
			ns, err := retryDump("neighbours", func() ([]netlink.Neigh, error) { return list.get(0, fam) })
			if err != nil {
				return nil, err
			}
			for _, n := range ns {
				rec := neighRecord(n)
				rec.Proxy = list.proxy
				out = append(out, rec)
			}
		}
	}
	return out, nil
}

// FDBRecords lists the bridge FDB entries of every link.
func (h *Neighs) FDBRecords() ([]NeighRecord, error) {
	ns, err := retryDump("fdb", func() ([]netlink.Neigh, error) { return h.nl.NeighList(0, unix.AF_BRIDGE) })
	if err != nil {
		return nil, err
	}
	out := make([]NeighRecord, 0, len(ns))
	for _, n := range ns {
		out = append(out, neighRecord(n))
	}
	return out, nil
}

func neighRecord(n netlink.Neigh) NeighRecord {
	return NeighRecord{IP: n.IP, LinkIndex: n.LinkIndex, MAC: n.HardwareAddr, State: n.State, Flags: n.Flags,
		Vlan: n.Vlan, VNI: n.VNI, MasterIndex: n.MasterIndex}
}

// QdiscRecord is a qdisc and, for a clsact qdisc, the filters on its
// ingress and egress hooks.
type QdiscRecord struct {
	Link           string
	Type           string
	Handle, Parent string // in tc's words: "root", "ffff:fff1", ...
	Filters        []FilterRecord
}

// FilterRecord is a tc filter on a clsact hook.
type FilterRecord struct {
	Hook     string // ingress or egress
	Type     string
	Priority uint16
	Handle   uint32
	Protocol uint16
	BPF      *BPFRecord // the program of a bpf filter
}

// BPFRecord is a bpf filter's program.
type BPFRecord struct {
	Name         string
	ID           int
	Tag          string
	DirectAction bool
}

// Qdiscs lists every link's qdiscs, with the filters of each clsact qdisc.
func (h *TC) Qdiscs() ([]QdiscRecord, error) {
	ls, err := retryDump("links", h.nl.LinkList)
	if err != nil {
		return nil, err
	}
	var out []QdiscRecord
	for _, l := range ls {
		qs, err := h.nl.QdiscList(l)
		if err != nil {
			return nil, fmt.Errorf("list qdiscs of %s: %w", l.Attrs().Name, err)
		}
		for _, q := range qs {
			rec := QdiscRecord{Link: l.Attrs().Name, Type: q.Type(),
				Handle: netlink.HandleStr(q.Attrs().Handle), Parent: netlink.HandleStr(q.Attrs().Parent)}
			if q.Type() == "clsact" {
				if rec.Filters, err = h.clsactFilters(l); err != nil {
					return nil, err
				}
			}
			out = append(out, rec)
		}
	}
	return out, nil
}

func (h *TC) clsactFilters(l netlink.Link) ([]FilterRecord, error) {
	var out []FilterRecord
	for _, hook := range []struct {
		name   string
		parent uint32
	}{{"ingress", netlink.HANDLE_MIN_INGRESS}, {"egress", netlink.HANDLE_MIN_EGRESS}} {
		fs, err := h.nl.FilterList(l, hook.parent)
		if err != nil {
			return nil, fmt.Errorf("list %s filters of %s: %w", hook.name, l.Attrs().Name, err)
		}
		for _, f := range fs {
			a := f.Attrs()
			rec := FilterRecord{Hook: hook.name, Type: f.Type(), Priority: a.Priority, Handle: a.Handle, Protocol: a.Protocol}
			if b, ok := f.(*netlink.BpfFilter); ok {
				rec.BPF = &BPFRecord{Name: b.Name, ID: b.Id, Tag: b.Tag, DirectAction: b.DirectAction}
			}
			out = append(out, rec)
		}
	}
	return out, nil
}
