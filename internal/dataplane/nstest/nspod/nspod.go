// Package nspod plumbs pods for data-plane tests with podnet, the way the
// daemon does on a node. It is apart from nstest because podnet's own
// dependencies test with nstest. It is for tests only.
package nspod

import (
	"context"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/dataplane/nstest"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
)

// Plumb creates a pod namespace and plumbs it from hostNS with podnet,
// holding addrs: the pod is default/pod-<name> (container c-<name>, UID
// uid-<name>, interface eth0). It returns the pod's namespace and the name
// of its veth on the host side.
func Plumb(tb testing.TB, hostNS, name string, addrs ...podnet.Address) (podNS, hostVeth string) {
	tb.Helper()
	static := podnet.NewStatic()
	static.Set("default", "pod-"+name, addrs...)
	b, err := podnet.New(podnet.Config{HostNetns: hostNS, Addresses: static, AddressTimeout: 2 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	podNS = nstest.New(tb)
	att := cniserver.Attachment{
		ContainerID: "c-" + name, IfName: "eth0", Netns: podNS,
		PodNamespace: "default", PodName: "pod-" + name, PodUID: "uid-" + name,
	}
	if _, err := b.Add(context.Background(), att); err != nil {
		tb.Fatalf("plumb pod %s: %v", name, err)
	}
	return podNS, podnet.HostVethName(att)
}
