package podnet

// Recovery. The daemon's state file is a cache of the pod interfaces it
// built, not their only record: every host veth carries, as its alias, the
// attachment it belongs to ("estuary <container ID>/<ifname> <netns>"), and
// the local-pods table routes each pod address to its veth. A daemon whose
// state file is missing or was quarantined as unreadable rebuilds its
// endpoints from these and from the node's Bound IPInstances (which name
// the pods) before its data-path loop runs, so no running pod's routes,
// proxy neighbours or announcements are withdrawn because a local file was
// lost.

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/cniserver/store"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
)

// aliasTag starts the alias of every host veth podnet makes.
const aliasTag = "estuary"

// maxAlias is the kernel's limit on a link alias (IFALIASZ - 1).
const maxAlias = 255

// endpointAlias is the alias of an attachment's host veth. The netns is
// left out when it would not fit; the key never is (it always fits: a
// container ID the server accepts is at most 128 bytes).
func endpointAlias(a cniserver.Attachment) string {
	s := aliasTag + " " + a.ContainerID + "/" + a.IfName
	if len(s)+1+len(a.Netns) <= maxAlias {
		s += " " + a.Netns
	}
	return s
}

// parseEndpointAlias reads an alias endpointAlias wrote.
func parseEndpointAlias(s string) (key store.Key, netns string, ok bool) {
	f := strings.Fields(s)
	if len(f) < 2 || len(f) > 3 || f[0] != aliasTag {
		return store.Key{}, "", false
	}
	id, ifname, ok := strings.Cut(f[1], "/")
	if !ok || id == "" || ifname == "" || strings.Contains(ifname, "/") {
		return store.Key{}, "", false
	}
	if len(f) == 3 {
		netns = f[2]
	}
	return store.Key{ContainerID: id, IfName: ifname}, netns, true
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
	links, err := host.Links(HostVethPrefix)
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
		key, netns, ok := parseEndpointAlias(l.Alias)
		if l.Type != "veth" || !ok {
			unnamed = append(unnamed, l.Name)
			continue
		}
		ep := store.Endpoint{Key: key, Netns: netns, Created: now, Recovered: true}
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
