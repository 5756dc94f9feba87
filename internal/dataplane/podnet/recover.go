package podnet

// Recovery. The kernel keeps its own record of the pod interfaces podnet
// built: every host veth carries, as its alias, the attachment it belongs
// to ("estuary <container ID>/<ifname> <netns>"), and the local-pods table
// routes each pod address to its veth. Interfaces lists them from these
// alone, so the node can rebuild its endpoint records when its state file
// is lost (package node joins them with the pods' records). A pinned MAC
// needs no rebuilding: the pod interface has it and the host veth's alias
// records it (mac.go).

import (
	"fmt"
	"net/netip"
	"strings"
	"unicode"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
)

// aliasTag starts the alias of every host veth podnet makes.
const aliasTag = "estuary"

// aliasMAC starts the alias's field that holds a pinned MAC.
const aliasMAC = "mac="

// maxAlias is the kernel's limit on a link alias (IFALIASZ - 1).
const maxAlias = 255

// endpointAlias is the alias of an attachment's host veth:
// "estuary <container ID>/<ifname> [<netns>] [mac=<pinned MAC>]". The netns
// is left out when it would not fit, or when it holds white space (which
// separates the fields); the key and the MAC never are (they always fit: a
// container ID the CNI server accepts is at most 128 bytes, and neither it
// nor an interface name holds white space).
func endpointAlias(sp Spec) string {
	s := aliasTag + " " + sp.ContainerID + "/" + sp.IfName
	var tail string
	if !sp.MAC.IsZero() {
		tail = " " + aliasMAC + sp.MAC.String()
	}
	if len(s)+1+len(sp.Netns)+len(tail) <= maxAlias && !strings.ContainsFunc(sp.Netns, unicode.IsSpace) {
		s += " " + sp.Netns
	}
	return s + tail
}

// aliasFields are the fields of an alias endpointAlias wrote.
type aliasFields struct {
	containerID string
	ifName      string
	netns       string
	mac         desired.MAC // zero: none pinned
}

// parseEndpointAlias reads an alias endpointAlias wrote.
func parseEndpointAlias(s string) (aliasFields, bool) {
	f := strings.Fields(s)
	if len(f) < 2 || len(f) > 4 || f[0] != aliasTag {
		return aliasFields{}, false
	}
	id, ifname, ok := strings.Cut(f[1], "/")
	if !ok || id == "" || ifname == "" || strings.Contains(ifname, "/") {
		return aliasFields{}, false
	}
	out := aliasFields{containerID: id, ifName: ifname}
	rest := f[2:]
	if len(rest) > 0 && !strings.HasPrefix(rest[0], aliasMAC) {
		out.netns, rest = rest[0], rest[1:]
	}
	switch {
	case len(rest) > 1:
		return aliasFields{}, false
	case len(rest) == 1:
		v, tagged := strings.CutPrefix(rest[0], aliasMAC)
		mac, err := desired.ParseMAC(v)
		if !tagged || err != nil {
			return aliasFields{}, false
		}
		out.mac = mac
	}
	return out, true
}

// Plumbed is a pod interface found in the host namespace.
type Plumbed struct {
	// ContainerID, IfName and Netns are the attachment its host veth's
	// alias names (Netns empty when the alias had no room for it).
	ContainerID string
	IfName      string
	Netns       string
	// HostVeth is its host side.
	HostVeth string
	// IPs are the addresses the local-pods table routes to HostVeth, as
	// host prefixes (/32, /128).
	IPs []netip.Prefix
}

// Interfaces lists the pod interfaces Plumb built in the host namespace:
// every host veth whose alias names its attachment, with the addresses the
// local-pods table routes to it. unnamed lists host veths without such an
// alias (made before aliases were written, or by hand). It only reads.
func (h *Plumber) Interfaces() (ifs []Plumbed, unnamed []string, err error) {
	host, err := ops.Open(h.hostNetns)
	if err != nil {
		return nil, nil, fmt.Errorf("host namespace: %w", err)
	}
	defer host.Close()
	links, err := host.Links().List(HostVethPrefix)
	if err != nil {
		return nil, nil, err
	}
	kernel, err := host.Read(ops.Scope{NoAddrs: true})
	if err != nil {
		return nil, nil, err
	}
	for _, l := range links {
		alias, ok := parseEndpointAlias(l.Alias)
		if l.Type != "veth" || !ok {
			unnamed = append(unnamed, l.Name)
			continue
		}
		p := Plumbed{ContainerID: alias.containerID, IfName: alias.ifName, Netns: alias.netns, HostVeth: l.Name}
		for _, rt := range kernel.Routes {
			if rt.Table == desired.TableLocalPods && rt.Dev == l.Name && rt.Dst.IsSingleIP() {
				p.IPs = append(p.IPs, rt.Dst)
			}
		}
		ifs = append(ifs, p)
	}
	return ifs, unnamed, nil
}
