package nodesnap

// The kernel's sections: the namespace's whole network state as text, for
// people. ops lists the objects as values; these render each on one line in
// the words of iproute2 (`ip -d link`, `ip rule`, `ip route show table all`,
// `bridge fdb`, `tc`) without needing its binaries, which the daemon's image
// does not carry. Lines are sorted within a section so that two reports
// diff cleanly.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
)

// kernelSources are the sections read through h, in reading order: links,
// addresses, rules, routes, neighbours, FDB and traffic control. Each reads
// the kernel when called.
func kernelSources(h *ops.Handle) []Source {
	return []Source{
		{"links", func(context.Context) ([]string, error) { return linkLines(h.Links()) }},
		{"addresses", withNames(h, func(names map[int]string) ([]string, error) { return addrLines(h.Addrs(), names) })},
		{"rules", func(context.Context) ([]string, error) { return ruleLines(h.Rules()) }},
		{"routes", withNames(h, func(names map[int]string) ([]string, error) { return routeLines(h.Routes(), names) })},
		{"neighbours", withNames(h, func(names map[int]string) ([]string, error) { return neighLines(h.Neighs(), names) })},
		{"fdb", withNames(h, func(names map[int]string) ([]string, error) { return fdbLines(h.Neighs(), names) })},
		{"tc", func(context.Context) ([]string, error) { return tcLines(h.TC()) }},
	}
}

// withNames reads the namespace's link names by index, then lines.
func withNames(h *ops.Handle, lines func(map[int]string) ([]string, error)) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) {
		names, err := h.Links().Names()
		if err != nil {
			return nil, err
		}
		return lines(names)
	}
}

func linkLines(l *ops.Links) ([]string, error) {
	ls, err := l.Records()
	if err != nil {
		return nil, err
	}
	names := map[int]string{}
	for _, r := range ls {
		names[r.Index] = r.Name
	}
	out := make([]string, 0, len(ls))
	for _, r := range ls {
		out = append(out, linkLine(r, names))
	}
	return sortedLines(out), nil
}

// linkLine renders a link: index, name, type, state, flags and what its
// type adds (a VXLAN's VNI and port, a VLAN's id, an attached XDP program).
func linkLine(l ops.LinkRecord, names map[int]string) string {
	w := &words{}
	w.add("%d: %s %s mtu %d state %s flags %s", l.Index, l.Name, l.Type, l.MTU, l.OperState, flagsString(l.Flags))
	if len(l.MAC) > 0 {
		w.add("mac %s", l.MAC)
	}
	if l.MasterIndex > 0 {
		w.add("master %s", nameOf(names, l.MasterIndex))
	}
	if l.ParentIndex > 0 {
		w.add("link %s", nameOf(names, l.ParentIndex))
	}
	if l.NetNsID >= 0 && l.ParentIndex > 0 {
		w.add("link-netnsid %d", l.NetNsID)
	}
	if l.Alias != "" {
		w.add("alias %q", l.Alias)
	}
	switch {
	case l.VXLAN != nil:
		v := l.VXLAN
		w.add("vni %d port %d local %s dev %s learning %t", v.VNI, v.Port, ipOrAny(v.Local), nameOf(names, v.DevIndex), v.Learning)
	case l.VLAN != nil:
		w.add("vlan id %d protocol %s", l.VLAN.ID, l.VLAN.Protocol)
	case l.VLANFiltering != nil:
		w.add("vlan_filtering %t", *l.VLANFiltering)
	}
	if x := l.XDP; x != nil {
		w.add("xdp prog %d mode %d", x.ProgID, x.Mode)
	}
	return w.String()
}

func addrLines(a *ops.Addrs, names map[int]string) ([]string, error) {
	as, err := a.Records()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(as))
	for _, a := range as {
		w := &words{}
		w.add("%s %s %s scope %s", nameOf(names, a.LinkIndex), familyWord(a.IPNet.IP), a.IPNet, scopeName(a.Scope))
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

func ruleLines(r *ops.Rules) ([]string, error) {
	rs, err := r.Records()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, ruleLine(r))
	}
	slices.SortStableFunc(out, comparePriority)
	return out, nil
}

// ruleLine renders a policy rule as `ip rule` does, its family first.
func ruleLine(r ops.RuleRecord) string {
	w := &words{}
	w.add("%s %d:", familyName(r.Family), r.Priority)
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

func routeLines(r *ops.Routes, names map[int]string) ([]string, error) {
	rs, err := r.Records()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, routeLine(r, names))
	}
	return sortedLines(out), nil
}

// routeLine renders a route as `ip route show table all` does, led by its
// table and family so that a table's routes sort together.
func routeLine(r ops.RouteRecord, names map[int]string) string {
	w := &words{}
	w.add("table %s %s", tableName(r.Table), familyName(r.Family))
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
	if r.Via != "" {
		w.add("via %s", r.Via)
	}
	if r.LinkIndex > 0 {
		w.add("dev %s", nameOf(names, r.LinkIndex))
	}
	for _, nh := range r.MultiPath {
		w.add("nexthop via %s dev %s weight %d", ipOrAny(nh.Gw), nameOf(names, nh.LinkIndex), nh.Hops+1)
	}
	w.add("proto %s", protoName(uint8(r.Protocol)))
	if r.Family == unix.AF_INET {
		w.add("scope %s", scopeName(r.Scope))
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

func neighLines(n *ops.Neighs, names map[int]string) ([]string, error) {
	ns, err := n.Records()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		w := &words{}
		w.add("%s dev %s", n.IP, nameOf(names, n.LinkIndex))
		if len(n.MAC) > 0 {
			w.add("lladdr %s", n.MAC)
		}
		if n.Proxy {
			w.add("proxy")
		} else {
			w.add("%s", neighState(n.State))
		}
		if n.Flags&unix.NTF_ROUTER != 0 {
			w.add("router")
		}
		out = append(out, w.String())
	}
	return sortedLines(out), nil
}

func fdbLines(n *ops.Neighs, names map[int]string) ([]string, error) {
	ns, err := n.FDBRecords()
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ns))
	for _, n := range ns {
		w := &words{}
		w.add("%s dev %s", n.MAC, nameOf(names, n.LinkIndex))
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
		if n.Flags&unix.NTF_SELF != 0 {
			w.add("self")
		}
		w.add("%s", neighState(n.State))
		out = append(out, w.String())
	}
	return sortedLines(out), nil
}

// tcLines lists every qdisc but the kernel's defaults, and the filters on
// each clsact qdisc's ingress and egress hooks, BPF programs by name, id
// and tag (estuary's fast path is one of them).
func tcLines(tc *ops.TC) ([]string, error) {
	qs, err := tc.Qdiscs()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, q := range qs {
		if q.Type == "noqueue" || q.Parent == "root" && q.Type == "pfifo_fast" {
			continue
		}
		out = append(out, fmt.Sprintf("%s qdisc %s handle %s parent %s", q.Link, q.Type, q.Handle, q.Parent))
		for _, f := range q.Filters {
			s := fmt.Sprintf("filter %s pref %d handle %#x protocol %#04x", f.Type, f.Priority, f.Handle, f.Protocol)
			if b := f.BPF; b != nil {
				s += fmt.Sprintf(" bpf %s id %d tag %s direct-action %t", b.Name, b.ID, b.Tag, b.DirectAction)
			}
			out = append(out, q.Link+" "+f.Hook+" "+s)
		}
	}
	return sortedLines(out), nil
}

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
