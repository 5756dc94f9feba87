package policydrops

import (
	"fmt"
	"strings"
)

// The node's policy table logs each packet it drops (rate-limited) to the
// kernel's netlink log with a prefix naming what dropped it:
//
//	estuary-drop <ingress|egress> <host veth> <policy>
//
// where policy is the dropping object ("cnp/<name>", ...), "-" for the
// pod's isolation, or "#<ref>" when the object's name does not fit the
// kernel's prefix (the daemon resolves ref, the name of the policy's
// counter, through the ruleset it wrote).
const prefixWord = "estuary-drop"

// MaxPrefix is the longest log prefix the kernel keeps (NF_LOG_PREFIXLEN
// less its terminating NUL).
const MaxPrefix = 127

// LogPrefix is the log prefix of a drop rule: direction "ingress" or
// "egress", the pod's host veth, the dropping policy ("" for isolation)
// and ref, what stands for the policy when its name is too long.
func LogPrefix(direction, veth, policy, ref string) string {
	p := policy
	if p == "" {
		p = "-"
	}
	s := prefixWord + " " + direction + " " + veth + " " + p
	if len(s) > MaxPrefix || strings.ContainsAny(p, " \x00") {
		s = prefixWord + " " + direction + " " + veth + " #" + ref
	}
	return s
}

// ParsePrefix reads a log prefix LogPrefix made: the direction, the host
// veth and the policy ("" for isolation; "#<ref>" when LogPrefix had to
// stand ref for it).
func ParsePrefix(prefix string) (direction, veth, policy string, err error) {
	f := strings.Fields(strings.TrimRight(prefix, "\x00"))
	if len(f) != 4 || f[0] != prefixWord {
		return "", "", "", fmt.Errorf("log prefix %q is not an estuary drop", prefix)
	}
	if f[1] != "ingress" && f[1] != "egress" {
		return "", "", "", fmt.Errorf("log prefix %q: direction %q", prefix, f[1])
	}
	if f[3] == "-" {
		f[3] = ""
	}
	return f[1], f[2], f[3], nil
}
