package podnet

// Recovery. The daemon's state file is a cache of the pod interfaces it
// built, not their only record: every host veth carries, as its alias, the
// attachment it belongs to ("estuary <container ID>/<ifname> <netns>"), and
// the local-pods table routes each pod address to its veth. A daemon whose
// state file is missing or was quarantined as unreadable rebuilds its
// endpoints from these and from the node's Bound IPInstances (which name
// the pods) before its data-path loop runs, so no running pod's routes,
// proxy neighbours or announcements are withdrawn because a local file was
// lost. A pinned MAC needs no rebuilding: the pod interface has it and the
// host veth's alias records it (mac.go).

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
	"github.com/estuary-cni/estuary/internal/node/store"
)

// aliasTag starts the alias of every host veth podnet makes.
const aliasTag = "estuary"

// aliasMAC starts the alias's field that holds a pinned MAC.
const aliasMAC = "mac="

// maxAlias is the kernel's limit on a link alias (IFALIASZ - 1).
const maxAlias = 255

// endpointAlias is the alias of an attachment's host veth:
// "estuary <container ID>/<ifname> [<netns>] [mac=<pinned MAC>]". The netns
// is left out when it would not fit; the key and the MAC never are (they
// always fit: a container ID the server accepts is at most 128 bytes).
func endpointAlias(a cniserver.Attachment, mac state.MAC) string {
	s := aliasTag + " " + a.ContainerID + "/" + a.IfName
	var tail string
	if !mac.IsZero() {
		tail = " " + aliasMAC + mac.String()
	}
	if len(s)+1+len(a.Netns)+len(tail) <= maxAlias {
		s += " " + a.Netns
	}
	return s + tail
}

// aliasFields are the fields of an alias endpointAlias wrote.
type aliasFields struct {
	key   store.Key
	netns string
	mac   state.MAC // zero: none pinned
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
	out := aliasFields{key: store.Key{ContainerID: id, IfName: ifname}}
	rest := f[2:]
	if len(rest) > 0 && !strings.HasPrefix(rest[0], aliasMAC) {
		out.netns, rest = rest[0], rest[1:]
	}
	switch {
	case len(rest) > 1:
		return aliasFields{}, false
	case len(rest) == 1:
		v, tagged := strings.CutPrefix(rest[0], aliasMAC)
		mac, err := state.ParseMAC(v)
		if !tagged || err != nil {
			return aliasFields{}, false
		}
		out.mac = mac
	}
	return out, true
}

// Recorded is one address the node's records bind to a pod of this node.
type Recorded struct {
	IP        netip.Prefix // with its subnet's prefix length
	Namespace string
	Pod       string
	PodUID    string
}

// Recover lists, as endpoint records, the pod interfaces this backend built
// in the host namespace: every host veth whose alias names its attachment,
// with the addresses the local-pods table routes to it, and the pod the
// records bind those addresses to. unnamed lists host veths without such an
// alias (made before aliases were written, or by hand); they are left as
// they are.
func (b *Backend) Recover(recorded []Recorded) (eps []store.Endpoint, unnamed []string, err error) {
	host, err := ops.Open(b.cfg.HostNetns)
	if err != nil {
		return nil, nil, fmt.Errorf("recover endpoints: host namespace: %w", err)
	}
	defer host.Close()
	links, err := host.Links().List(HostVethPrefix)
	if err != nil {
		return nil, nil, fmt.Errorf("recover endpoints: %w", err)
	}
	kernel, err := host.Read(ops.Scope{NoAddrs: true})
	if err != nil {
		return nil, nil, fmt.Errorf("recover endpoints: %w", err)
	}
	byIP := make(map[netip.Addr]Recorded, len(recorded))
	for _, r := range recorded {
		byIP[r.IP.Addr()] = r
	}
	now := time.Now().UTC()
	for _, l := range links {
		alias, ok := parseEndpointAlias(l.Alias)
		if l.Type != "veth" || !ok {
			unnamed = append(unnamed, l.Name)
			continue
		}
		ep := store.Endpoint{Key: alias.key, Netns: alias.netns, Created: now, Recovered: true}
		for _, rt := range kernel.Routes {
			if rt.Table != state.TableLocalPods || rt.Dev != l.Name || !rt.Dst.IsSingleIP() {
				continue
			}
			if r, ok := byIP[rt.Dst.Addr()]; ok {
				ep.PodNamespace, ep.PodName, ep.PodUID = r.Namespace, r.Pod, r.PodUID
			}
			// As the server records a reply's addresses: host prefixes.
			ep.IPs = append(ep.IPs, rt.Dst.String())
		}
		eps = append(eps, ep)
	}
	return eps, unnamed, nil
}
