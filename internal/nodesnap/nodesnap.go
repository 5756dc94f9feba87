// Package nodesnap owns the snapshots of a node's networking, in two
// forms for two readers.
//
// A report (Collect, in the format of package nodereport) is the support
// bundle's: links, addresses, policy rules, routes of every table,
// neighbours, FDB, traffic control and BPF filters, nftables (estuary's
// tables and the portmap plugin's chains in full, others counted) and the
// sysctls estuary sets, plus whatever sources the caller adds (the daemon
// adds its endpoint store, BGP peers and files). The kernel's objects are
// read through package ops as plain values and rendered here in iproute2's
// words, since the daemon's image carries no iproute2. `estuary-daemon
// node-state` prints it; `kubectl estuary sysdump` runs that in every
// daemon pod and renders the JSON with nodereport's WriteText, without
// linking this package. A section that cannot be read is recorded with its
// error and the others are still read: a support bundle is most needed on
// a node that is broken.
//
// A Snapshot (Take) is the uninstall tests': what a CNI plugin can leave on
// a node (links, addresses, policy rules, routes in every table, static and
// proxy neighbours, FDB entries, nft tables, qdiscs, sysctls and files) as
// normalised text from the node's own ip/nft/tc commands, and Diff compares
// two: a node after `helm uninstall` must equal the node before install.
// Commands run through a Runner, so the same snapshot is taken of a lab
// node (in its network and mount namespaces) and of a test's namespace.
// Normalisation drops what changes without anyone changing the node:
// interface indexes, counters, lifetimes, and the peer index of veths.
package nodesnap

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Runner runs argv on the node and returns its standard output.
type Runner func(ctx context.Context, argv ...string) (string, error)

// Options says what a snapshot covers besides the network state.
type Options struct {
	// Paths are files and directories whose trees (type, mode, size and
	// content hash of each file) are recorded; a missing one is recorded
	// as missing.
	Paths []string
	// Sysctls is a regular expression of sysctl names (dotted, as
	// `sysctl -a` prints them) to record.
	Sysctls string
}

// Snapshot is each section's sorted, normalised lines.
type Snapshot map[string][]string

// sections are the network state's commands.
var sections = []struct {
	name string
	argv []string
}{
	{"links", []string{"ip", "-o", "link", "show"}},
	{"addresses", []string{"ip", "-o", "addr", "show"}},
	{"rules4", []string{"ip", "-4", "rule", "show"}},
	{"rules6", []string{"ip", "-6", "rule", "show"}},
	{"routes4", []string{"ip", "-4", "route", "show", "table", "all"}},
	{"routes6", []string{"ip", "-6", "route", "show", "table", "all"}},
	{"neighbours-permanent", []string{"ip", "neigh", "show", "nud", "permanent"}},
	{"neighbours-proxy4", []string{"ip", "-4", "neigh", "show", "proxy"}},
	{"neighbours-proxy6", []string{"ip", "-6", "neigh", "show", "proxy"}},
	{"fdb", []string{"bridge", "fdb", "show"}},
	{"nft-tables", []string{"nft", "list", "tables"}},
	{"qdiscs", []string{"tc", "qdisc", "show"}},
}

// Take records the node's state.
func Take(ctx context.Context, run Runner, o Options) (Snapshot, error) {
	s := Snapshot{}
	for _, sec := range sections {
		out, err := run(ctx, sec.argv...)
		if err != nil {
			return nil, fmt.Errorf("snapshot %s (%s): %w", sec.name, strings.Join(sec.argv, " "), err)
		}
		s[sec.name] = normalise(out)
	}
	if o.Sysctls != "" {
		out, err := run(ctx, "sysctl", "-a", "-r", o.Sysctls)
		if err != nil {
			return nil, fmt.Errorf("snapshot sysctls: %w", err)
		}
		s["sysctls"] = normalise(out)
	}
	for _, p := range o.Paths {
		// find prints each entry's type, mode, size and path; sha256sum
		// each regular file's content.
		script := fmt.Sprintf(`p=%q; if [ ! -e "$p" ]; then echo "missing $p"; exit 0; fi; `+
			`find "$p" -printf '%%y %%m %%s %%p\n'; find "$p" -type f -exec sha256sum {} +`, p)
		out, err := run(ctx, "sh", "-c", script)
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", p, err)
		}
		s["files "+p] = normalise(out)
	}
	return s, nil
}

var volatile = []*regexp.Regexp{
	regexp.MustCompile(`^\d+:\s+`),                           // interface index of ip -o link/addr
	regexp.MustCompile(`@if\d+`),                             // a veth's peer index
	regexp.MustCompile(`\s+link-netns(id)? \S+`),             // the peer's namespace id
	regexp.MustCompile(`\s+(valid|preferred)_lft \S+`),       // address lifetimes
	regexp.MustCompile(`\s+expires \S+`),                     // route and neighbour expiry
	regexp.MustCompile(`\\\s+`),                              // ip -o line continuations
	regexp.MustCompile(`\s+(qlen|group) \S+|\s+altname \S+`), // queue and group details
	regexp.MustCompile(`\s+tentative\b`),                     // an IPv6 address still in DAD
}

// normalise drops volatile fields and sorts the lines.
func normalise(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		for _, re := range volatile {
			l = re.ReplaceAllString(l, " ")
		}
		l = strings.Join(strings.Fields(l), " ")
		if l != "" {
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	return slices.Compact(lines)
}

// Diff lists what differs from before to after, a line per change:
// "<section>: - <line>" for what went, "<section>: + <line>" for what came.
func Diff(before, after Snapshot) []string {
	names := map[string]bool{}
	for n := range before {
		names[n] = true
	}
	for n := range after {
		names[n] = true
	}
	var keys []string
	for n := range names {
		keys = append(keys, n)
	}
	sort.Strings(keys)
	var d []string
	for _, n := range keys {
		b, a := set(before[n]), set(after[n])
		for _, l := range before[n] {
			if !a[l] {
				d = append(d, n+": - "+l)
			}
		}
		for _, l := range after[n] {
			if !b[l] {
				d = append(d, n+": + "+l)
			}
		}
	}
	return d
}

func set(lines []string) map[string]bool {
	m := make(map[string]bool, len(lines))
	for _, l := range lines {
		m[l] = true
	}
	return m
}
