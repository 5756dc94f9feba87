package nodesnap

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/estuary-cni/estuary/internal/nsrun"
)

// globalSysctls are the node-wide settings estuary sets or depends on: IPv4
// forwarding (the daemon), conntrack's liberal TCP window (the fast path),
// and the BPF JIT and bridge netfilter settings the data path meets.
var globalSysctls = []string{
	"net/ipv4/ip_forward",
	"net/netfilter/nf_conntrack_tcp_be_liberal",
	"net/netfilter/nf_conntrack_max",
	"net/core/bpf_jit_enable",
	"net/bridge/bridge-nf-call-iptables",
	"net/bridge/bridge-nf-call-ip6tables",
}

// linkSysctls are the per-link settings estuary writes on the tunnel, the
// underlay's vlan-ifs and uplinks, the pods' host veths and, for IPv6
// forwarding, the node's links' accept_ra (packages overlay, underlay and
// podnet), read for every link and for "all" and "default".
var linkSysctls = []string{
	"ipv4/conf/%s/forwarding",
	"ipv4/conf/%s/rp_filter",
	"ipv4/conf/%s/proxy_arp",
	"ipv4/neigh/%s/proxy_delay",
	"ipv4/neigh/%s/app_solicit",
	"ipv6/conf/%s/disable_ipv6",
	"ipv6/conf/%s/forwarding",
	"ipv6/conf/%s/proxy_ndp",
	"ipv6/conf/%s/accept_dad",
	"ipv6/conf/%s/accept_ra",
	"ipv6/neigh/%s/proxy_delay",
	"ipv6/neigh/%s/app_solicit",
}

// sysctls reads the settings in the namespace at netns: a line per global
// key (key=value) and a line per link with each of its keys.
func sysctls(netns string) func(context.Context) ([]string, error) {
	return func(context.Context) ([]string, error) {
		var out []string
		err := nsrun.Do(netns, func() error {
			var err error
			out, err = readSysctls("/proc/sys")
			return err
		})
		return out, err
	}
}

// readSysctls reads the settings under root (/proc/sys, or a test's tree).
func readSysctls(root string) ([]string, error) {
	var out []string
	for _, k := range globalSysctls {
		out = append(out, dotted(k)+"="+readValue(filepath.Join(root, k)))
	}
	ents, err := os.ReadDir(filepath.Join(root, "net/ipv4/conf"))
	if err != nil {
		return out, err
	}
	links := make([]string, 0, len(ents))
	for _, e := range ents {
		links = append(links, e.Name())
	}
	slices.Sort(links)
	for _, l := range links {
		parts := []string{l}
		for _, k := range linkSysctls {
			rel := strings.Replace(k, "%s", l, 1)
			parts = append(parts, dotted(strings.Replace(k, "/%s", "", 1))+"="+readValue(filepath.Join(root, "net", rel)))
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out, nil
}

// readValue is a setting's value, "-" when the kernel has no such setting
// (IPv6 off, no bridge module) and "?" when it cannot be read.
func readValue(path string) string {
	b, err := os.ReadFile(path) // #nosec G304 -- a /proc/sys path
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "-"
	case err != nil:
		return "?"
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

func dotted(key string) string { return strings.ReplaceAll(key, "/", ".") }
