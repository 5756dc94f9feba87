// Package nspod plumbs pods for data-plane tests with podnet, the way the
// daemon does on a node. It is apart from nstest because podnet's own
// dependencies test with nstest. It is for tests only.
package nspod

import (
	"net/netip"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// Plumb creates a pod namespace and plumbs it from hostNS with podnet,
// holding ips: the pod's container is c-<name> with interface eth0. It
// returns the pod's namespace and the name of its veth on the host side.
func Plumb(tb testing.TB, hostNS, name string, ips ...netip.Addr) (podNS, hostVeth string) {
	tb.Helper()
	podNS = nstest.New(tb)
	s := podnet.Spec{ContainerID: "c-" + name, IfName: "eth0", Netns: podNS, IPs: ips}
	if _, err := podnet.NewPlumber(hostNS).Plumb(s); err != nil {
		tb.Fatalf("plumb pod %s: %v", name, err)
	}
	return podNS, s.HostVeth()
}
