package nodesnap

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
)

// words builds a line of space-separated parts.
type words struct{ parts []string }

func (w *words) add(format string, args ...any) {
	w.parts = append(w.parts, fmt.Sprintf(format, args...))
}
func (w *words) String() string { return strings.Join(w.parts, " ") }

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

// familyName is "ipv4" or "ipv6" for an AF_ number.
func familyName(fam int) string {
	if fam == unix.AF_INET6 {
		return "ipv6"
	}
	return "ipv4"
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
		{unix.NUD_INCOMPLETE, "INCOMPLETE"}, {unix.NUD_REACHABLE, "REACHABLE"}, {unix.NUD_STALE, "STALE"},
		{unix.NUD_DELAY, "DELAY"}, {unix.NUD_PROBE, "PROBE"}, {unix.NUD_FAILED, "FAILED"},
		{unix.NUD_NOARP, "NOARP"}, {unix.NUD_PERMANENT, "PERMANENT"},
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
