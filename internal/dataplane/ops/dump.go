package ops

// Dumps: the namespace's whole network state as text, for people.
//
// Read lists what estuary reconciles, as values to compare; a dump is for a
// maintainer reading a support bundle (kubectl estuary sysdump), so it
// covers everything in the namespace whoever wrote it, every table and both
// families, and renders each object on one line in the words of iproute2
// (`ip -d link`, `ip rule`, `ip route show table all`, `bridge fdb`, `tc`)
// without needing its binaries, which the daemon's image does not carry.
// Lines are sorted within a section so that two dumps diff cleanly.

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// Dump is one section of a namespace's state: its name and how to read it.
type Dump struct {
	Name  string
	Lines func() ([]string, error)
}

// Dumps returns the sections of the namespace's network state in reading
// order: links, addresses, rules, routes, neighbours, FDB and traffic
// control. Each reads the kernel when called.
func (h *Handle) Dumps() []Dump {
	return []Dump{
		{"links", h.Links().dump},
		{"addresses", func() ([]string, error) { return h.withNames(h.Addrs().dump) }},
		{"rules", h.Rules().dump},
		{"routes", func() ([]string, error) { return h.withNames(h.Routes().dump) }},
		{"neighbours", func() ([]string, error) { return h.withNames(h.Neighs().dump) }},
		{"fdb", func() ([]string, error) { return h.withNames(h.Neighs().dumpFDB) }},
		{"tc", h.TC().dump},
	}
}

// withNames runs dump with the namespace's link names by index.
func (h *Handle) withNames(dump func(map[int]string) ([]string, error)) ([]string, error) {
	l, err := h.links()
	if err != nil {
		return nil, err
	}
	return dump(l.byIndex)
}

func (h *Links) dump() ([]string, error) {
	ls, err := retryDump("links", h.nl.LinkList)
	if err != nil {
		return nil, err
	}
	names := map[int]string{}
	for _, l := range ls {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		out = append(out, linkLine(l, names))
	}
	return sortedLines(out), nil
}

// linkLine renders a link: index, name, type, state, flags and what its
// type adds (a VXLAN's VNI and port, a VLAN's id, an attached XDP program).
func linkLine(l netlink.Link, names map[int]string) string {
	a := l.Attrs()
	w := &words{}
	w.add("%d: %s %s mtu %d state %s flags %s", a.Index, a.Name, l.Type(), a.MTU, a.OperState, flagsString(a.Flags))
	if len(a.HardwareAddr) > 0 {
		w.add("mac %s", a.HardwareAddr)
	}
	if a.MasterIndex > 0 {
		w.add("master %s", nameOf(names, a.MasterIndex))
	}
	if a.ParentIndex > 0 {
		w.add("link %s", nameOf(names, a.ParentIndex))
	}
	if a.NetNsID >= 0 && a.ParentIndex > 0 {
		w.add("link-netnsid %d", a.NetNsID)
	}
	if a.Alias != "" {
		w.add("alias %q", a.Alias)
	}
	switch t := l.(type) {
	case *netlink.Vxlan:
		w.add("vni %d port %d local %s dev %s learning %t", t.VxlanId, t.Port, ipOrAny(t.SrcAddr), nameOf(names, t.VtepDevIndex), t.Learning)
	case *netlink.Vlan:
		w.add("vlan id %d protocol %s", t.VlanId, t.VlanProtocol)
	case *netlink.Bridge:
		if t.VlanFiltering != nil {
			w.add("vlan_filtering %t", *t.VlanFiltering)
		}
	}
	if x := a.Xdp; x != nil && x.Attached {
		w.add("xdp prog %d mode %d", x.ProgId, x.AttachMode)
	}
	return w.String()
}

func (h *Addrs) dump(names map[int]string) ([]string, error) {
	as, err := retryDump("addresses", func() ([]netlink.Addr, error) { return h.nl.AddrList(nil, netlink.FAMILY_ALL) })
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(as))
	for _, a := range as {
		w := &words{}
		w.add("%s %s %s scope %s", nameOf(names, a.LinkIndex), familyWord(a.IP), a.IPNet, scopeName(a.Scope))
		if a.Peer != nil {
			w.add("peer %s", a.Peer)
		}
		if f := addrFlags(a.Flags); f != "" {
			w.add("%s", f)
		}
		if a.Label != "" && a.Label != nameOf(names, a.LinkIndex) {
			w.add("label %s", a.Label)
		}
		out = append(out, w.String())
	}
	return sortedLines(out), nil
}

func (h *Rules) dump() ([]string, error) {
	var out []string
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := retryDump("rules", func() ([]netlink.Rule, error) { return h.nl.RuleList(fam) })
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			out = append(out, ruleLine(fam, r))
		}
	}
	slices.SortStableFunc(out, comparePriority)
	return out, nil
}

// ruleLine renders a policy rule as `ip rule` does, its family first.
func ruleLine(fam int, r netlink.Rule) string {
	w := &words{}
	w.add("%s %d:", familyName(fam), r.Priority)
	if r.Invert {
		w.add("not")
	}
	w.add("from %s", netOrAll(r.Src))
	if r.Dst != nil {
		w.add("to %s", r.Dst)
	}
	if r.Mark != 0 || r.Mask != nil {
		mask := uint32(0xffffffff)
		if r.Mask != nil {
			mask = *r.Mask
		}
		w.add("fwmark %#x/%#x", r.Mark, mask)
	}
	for _, kv := range []struct{ k, v string }{{"iif", r.IifName}, {"oif", r.OifName}} {
		if kv.v != "" {
			w.add("%s %s", kv.k, kv.v)
		}
	}
	if r.IPProto > 0 {
		w.add("ipproto %d", r.IPProto)
	}
	if r.Dport != nil {
		w.add("dport %d-%d", r.Dport.Start, r.Dport.End)
	}
	if r.Sport != nil {
		w.add("sport %d-%d", r.Sport.Start, r.Sport.End)
	}
	switch {
	case r.Goto > 0:
		w.add("goto %d", r.Goto)
	case r.Type != 0 && r.Type != unix.FR_ACT_TO_TBL:
		w.add("action %d", r.Type)
	default:
		w.add("lookup %s", tableName(r.Table))
	}
	if r.SuppressPrefixlen > 0 {
		w.add("suppress_prefixlength %d", r.SuppressPrefixlen)
	}
	if r.Protocol != 0 {
		w.add("proto %s", protoName(r.Protocol))
	}
	return w.String()
}

func (h *Routes) dump(names map[int]string) ([]string, error) {
	var out []string
	for _, fam := range []int{unix.AF_INET, unix.AF_INET6} {
		rs, err := retryDump("routes", func() ([]netlink.Route, error) {
			return h.nl.RouteListFiltered(fam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		})
		if err != nil {
			return nil, err
		}
		for _, r := range rs {
			out = append(out, routeLine(fam, r, names))
		}
	}
	return sortedLines(out), nil
}

// routeLine renders a route as `ip route show table all` does, led by its
// table and family so that a table's routes sort together.
func routeLine(fam int, r netlink.Route, names map[int]string) string {
	w := &words{}
	w.add("table %s %s", tableName(r.Table), familyName(fam))
	if r.Type != 0 && r.Type != unix.RTN_UNICAST {
		w.add("%s", routeType(r.Type))
	}
	dst := "default"
	if r.Dst != nil {
		dst = r.Dst.String()
	}
	w.add("%s", dst)
	if r.Gw != nil {
		w.add("via %s", r.Gw)
	}
	if r.Via != nil {
		w.add("via %s", r.Via)
	}
	if r.LinkIndex > 0 {
		w.add("dev %s", nameOf(names, r.LinkIndex))
	}
	for _, nh := range r.MultiPath {
		w.add("nexthop via %s dev %s weight %d", ipOrAny(nh.Gw), nameOf(names, nh.LinkIndex), nh.Hops+1)
	}
	w.add("proto %s", protoName(uint8(r.Protocol)))
	if fam == unix.AF_INET {
		w.add("scope %s", scopeName(int(r.Scope)))
	}
	if r.Src != nil {
		w.add("src %s", r.Src)
	}
	if r.Priority > 0 {
		w.add("metric %d", r.Priority)
	}
	if r.Flags&unix.RTNH_F_ONLINK != 0 {
		w.add("onlink")
	}
	if r.MTU > 0 {
		w.add("mtu %d", r.MTU)
	}
	return w.String()
}

func (h *Neighs) dump(names map[int]string) ([]string, error) {
	var out []string
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
				out = append(out, neighLine(n, list.proxy, names))
			}
		}
	}
	return sortedLines(out), nil
}

func neighLine(n netlink.Neigh, proxy bool, names map[int]string) string {
	w := &words{}
	w.add("%s dev %s", n.IP, nameOf(names, n.LinkIndex))
	if len(n.HardwareAddr) > 0 {
		w.add("lladdr %s", n.HardwareAddr)
	}
	if proxy {
		w.add("proxy")
	} else {
		w.add("%s", neighState(n.State))
	}
	if n.Flags&netlink.NTF_ROUTER != 0 {
		w.add("router")
	}
	return w.String()
}

func (h *Neighs) dumpFDB(names map[int]string) ([]string, error) {
	ns, err := retryDump("fdb", func() ([]netlink.Neigh, error) { return h.nl.NeighList(0, unix.AF_BRIDGE) })
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		w := &words{}
		w.add("%s dev %s", n.HardwareAddr, nameOf(names, n.LinkIndex))
		if n.IP != nil {
			w.add("dst %s", n.IP)
		}
		if n.Vlan > 0 {
			w.add("vlan %d", n.Vlan)
		}
		if n.VNI > 0 {
			w.add("vni %d", n.VNI)
		}
		if n.MasterIndex > 0 {
			w.add("master %s", nameOf(names, n.MasterIndex))
		}
		if n.Flags&netlink.NTF_SELF != 0 {
			w.add("self")
		}
		w.add("%s", neighState(n.State))
		out = append(out, w.String())
	}
	return sortedLines(out), nil
}

// dump lists every qdisc but the kernel's defaults, and the filters on
// each clsact qdisc's ingress and egress hooks, BPF programs by name, id
// and tag (estuary's fast path is one of them).
func (h *TC) dump() ([]string, error) {
	ls, err := retryDump("links", h.nl.LinkList)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range ls {
		qs, err := h.nl.QdiscList(l)
		if err != nil {
			return nil, fmt.Errorf("list qdiscs of %s: %w", l.Attrs().Name, err)
		}
		for _, q := range qs {
			if q.Type() == "noqueue" || q.Attrs().Parent == netlink.HANDLE_ROOT && q.Type() == "pfifo_fast" {
				continue
			}
			out = append(out, fmt.Sprintf("%s qdisc %s handle %s parent %s", l.Attrs().Name, q.Type(),
				netlink.HandleStr(q.Attrs().Handle), netlink.HandleStr(q.Attrs().Parent)))
			if q.Type() != "clsact" {
				continue
			}
			for _, hook := range []struct {
				name   string
				parent uint32
			}{{"ingress", netlink.HANDLE_MIN_INGRESS}, {"egress", netlink.HANDLE_MIN_EGRESS}} {
				fs, err := h.nl.FilterList(l, hook.parent)
				if err != nil {
					return nil, fmt.Errorf("list %s filters of %s: %w", hook.name, l.Attrs().Name, err)
				}
				for _, f := range fs {
					out = append(out, l.Attrs().Name+" "+hook.name+" "+filterLine(f))
				}
			}
		}
	}
	return sortedLines(out), nil
}

func filterLine(f netlink.Filter) string {
	a := f.Attrs()
	s := fmt.Sprintf("filter %s pref %d handle %#x protocol %#04x", f.Type(), a.Priority, a.Handle, a.Protocol)
	if b, ok := f.(*netlink.BpfFilter); ok {
		s += fmt.Sprintf(" bpf %s id %d tag %s direct-action %t", b.Name, b.Id, b.Tag, b.DirectAction)
	}
	return s
}

// words builds a line of space-separated parts.
type words struct{ parts []string }

func (w *words) add(format string, args ...any) {
	w.parts = append(w.parts, fmt.Sprintf(format, args...))
}
func (w *words) String() string { return strings.Join(w.parts, " ") }

func sortedLines(lines []string) []string {
	slices.Sort(lines)
	return lines
}

// comparePriority orders rule lines by family, then priority as a number.
func comparePriority(a, b string) int {
	fa, pa, _ := strings.Cut(a, " ")
	fb, pb, _ := strings.Cut(b, " ")
	if c := strings.Compare(fa, fb); c != 0 {
		return c
	}
	na, _ := strconv.Atoi(strings.SplitN(pa, ":", 2)[0])
	nb, _ := strconv.Atoi(strings.SplitN(pb, ":", 2)[0])
	return na - nb
}

func nameOf(names map[int]string, index int) string {
	if n, ok := names[index]; ok {
		return n
	}
	return "if" + strconv.Itoa(index)
}

func flagsString(f net.Flags) string {
	s := strings.ReplaceAll(f.String(), "|", ",")
	if s == "0" {
		return "none"
	}
	return s
}

func ipOrAny(ip net.IP) string {
	if ip == nil {
		return "any"
	}
	return ip.String()
}

func netOrAll(n *net.IPNet) string {
	if n == nil {
		return "all"
	}
	return n.String()
}

func familyWord(ip net.IP) string {
	if ip.To4() != nil {
		return "inet"
	}
	return "inet6"
}

func familyName(fam int) string {
	return strings.ToLower(string(fromAF(fam)))
}

func scopeName(s int) string {
	switch s {
	case unix.RT_SCOPE_UNIVERSE:
		return "global"
	case unix.RT_SCOPE_SITE:
		return "site"
	case unix.RT_SCOPE_LINK:
		return "link"
	case unix.RT_SCOPE_HOST:
		return "host"
	case unix.RT_SCOPE_NOWHERE:
		return "nowhere"
	}
	return strconv.Itoa(s)
}

func tableName(t int) string {
	switch t {
	case unix.RT_TABLE_MAIN:
		return "main"
	case unix.RT_TABLE_LOCAL:
		return "local"
	case unix.RT_TABLE_DEFAULT:
		return "default"
	}
	return strconv.Itoa(t)
}

func protoName(p uint8) string {
	switch p {
	case unix.RTPROT_KERNEL:
		return "kernel"
	case unix.RTPROT_BOOT:
		return "boot"
	case unix.RTPROT_STATIC:
		return "static"
	case unix.RTPROT_BIRD:
		return "bird"
	case unix.RTPROT_RA:
		return "ra"
	case unix.RTPROT_DHCP:
		return "dhcp"
	case desired.ProtocolEstuary:
		return "estuary"
	}
	return strconv.Itoa(int(p))
}

func routeType(t int) string {
	switch t {
	case unix.RTN_LOCAL:
		return "local"
	case unix.RTN_BROADCAST:
		return "broadcast"
	case unix.RTN_ANYCAST:
		return "anycast"
	case unix.RTN_MULTICAST:
		return "multicast"
	case unix.RTN_BLACKHOLE:
		return "blackhole"
	case unix.RTN_UNREACHABLE:
		return "unreachable"
	case unix.RTN_PROHIBIT:
		return "prohibit"
	case unix.RTN_THROW:
		return "throw"
	}
	return "type" + strconv.Itoa(t)
}

func addrFlags(f int) string {
	var out []string
	for _, n := range []struct {
		bit  int
		name string
	}{
		{unix.IFA_F_PERMANENT, "permanent"}, {unix.IFA_F_NODAD, "nodad"}, {unix.IFA_F_SECONDARY, "secondary"},
		{unix.IFA_F_TENTATIVE, "tentative"}, {unix.IFA_F_DADFAILED, "dadfailed"}, {unix.IFA_F_DEPRECATED, "deprecated"},
		{unix.IFA_F_NOPREFIXROUTE, "noprefixroute"},
	} {
		if f&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	return strings.Join(out, " ")
}

func neighState(s int) string {
	var out []string
	for _, n := range []struct {
		bit  int
		name string
	}{
		{netlink.NUD_INCOMPLETE, "INCOMPLETE"}, {netlink.NUD_REACHABLE, "REACHABLE"}, {netlink.NUD_STALE, "STALE"},
		{netlink.NUD_DELAY, "DELAY"}, {netlink.NUD_PROBE, "PROBE"}, {netlink.NUD_FAILED, "FAILED"},
		{netlink.NUD_NOARP, "NOARP"}, {netlink.NUD_PERMANENT, "PERMANENT"},
	} {
		if s&n.bit != 0 {
			out = append(out, n.name)
		}
	}
	if len(out) == 0 {
		return "NONE"
	}
	return strings.Join(out, ",")
}
