package podnet

// Router advertisements under IPv6 forwarding.
//
// The first IPv6 pod turns on net.ipv6.conf.all.forwarding, which the
// kernel copies to every link of the namespace (and to "default", so to
// every link made later). A link that forwards ignores router
// advertisements unless its accept_ra is 2, so a node that learns its IPv6
// default route or addresses by RA/SLAAC would lose them when their
// lifetime runs out, minutes after its first IPv6 pod. Before the write
// that turns forwarding on, every link that accepts RAs then (accept_ra 1)
// is raised to 2; should that fail, the pod's Plumb fails before forwarding
// goes on, so forwarding is never on with those links not raised. LXD does
// the same before it enables forwarding, hybridnet raises the link of an
// RA-learned default route, Talos raises every link; Cilium and the
// reference CNI plugins leave it to the admin, whose node then drops off.
//
// Left alone: lo; estuary's own links (the "est" device prefix: pods' host
// veths, the overlay's estvx*, the underlay's tagged vlan-ifs, which the
// underlay raises itself): a host veth accepting RAs would let a pod give
// the node a default route, so each gets accept_ra 0 instead (hostSysctls);
// links at accept_ra 0 (the admin said no) or already 2; "all" and
// "default" (default would make every later host veth accept RAs). When
// forwarding is already on, nothing is raised: it was the node's own choice
// (or an earlier daemon's, which raised the links then), and its links' RA
// handling is already what the admin lives with. A link added after
// forwarding went on starts with default's accept_ra (1) and is not raised
// either. Every raised value is journaled like any other sysctl the daemon
// changes, so uninstall puts 1 back.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/estuary-cni/estuary/internal/sysctl"
)

const forwardingV6 = "net/ipv6/conf/all/forwarding"

// kernelIPv6 says whether the kernel has IPv6 (no ipv6.disable=1): its
// per-link settings exist then in every namespace.
var kernelIPv6 = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/sys/net/ipv6/conf")
	return err == nil
})

// keepRAs raises accept_ra on the node's links before IPv6 forwarding goes
// on (hostSysctls); a failure stops the pod's Plumb before forwarding does.
func (p *plumbing) keepRAs() error {
	s, err := p.raSysctls()
	if err != nil {
		return err
	}
	if err := sysctl.Write(p.hostNS, s); err != nil {
		return fmt.Errorf("keep router advertisements: %w", err)
	}
	return nil
}

// raSysctls returns accept_ra=2 for every link of the host namespace that
// has accept_ra 1, when IPv6 forwarding is not on yet; nil otherwise.
func (p *plumbing) raSysctls() ([]sysctl.Setting, error) {
	on, err := sysctl.Read(p.hostNS, forwardingV6)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", forwardingV6, err)
	}
	if on == "1" {
		return nil, nil
	}
	links, err := p.host.Links().List("")
	if err != nil {
		return nil, fmt.Errorf("list links to keep router advertisements: %w", err)
	}
	var s []sysctl.Setting
	for _, l := range links {
		if !acceptsRAsOfItsOwn(l.Name) {
			continue
		}
		key := "net/ipv6/conf/" + l.Name + "/accept_ra"
		v, err := sysctl.Read(p.hostNS, key)
		if errors.Is(err, fs.ErrNotExist) {
			continue // gone since the listing, or no IPv6 on it
		}
		if err != nil {
			return nil, fmt.Errorf("link %s: %w", l.Name, err)
		}
		if v == "1" {
			s = append(s, sysctl.Setting{Key: key, Value: "2"})
		}
	}
	return s, nil
}

// acceptsRAsOfItsOwn says whether a link is one of the node's own, whose
// router advertisements are kept: not lo and not estuary's.
func acceptsRAsOfItsOwn(name string) bool {
	return name != "lo" && !strings.HasPrefix(name, HostVethPrefix)
}
