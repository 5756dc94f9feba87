package daemon

import (
	"context"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/dataplane/nstest"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/sysctl"
	"github.com/estuary-cni/estuary/pkg/family"
)

// The accept_ra podnet raises before it turns IPv6 forwarding on is
// journaled with forwarding itself, and an uninstall puts both back.
func TestJournalRestoresAcceptRAAndIPv6Forwarding(t *testing.T) {
	nstest.RequireRoot(t)
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		t.Skip("kernel has no IPv6")
	}
	host := nstest.New(t)
	nstest.IP(t, host, "link", "set", "lo", "up")
	nstest.IP(t, host, "link", "add", "up1", "type", "veth", "peer", "name", "up1p")
	nstest.IP(t, host, "link", "set", "up1", "up")

	j, err := openJournal(t.TempDir(), host)
	if err != nil {
		t.Fatal(err)
	}
	sysctl.SetRecorder(j)
	t.Cleanup(func() { sysctl.SetRecorder(nil) })

	addrs := podnet.NewStatic()
	b, err := podnet.New(podnet.Config{HostNetns: host, Addresses: addrs, AddressTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pod := nstest.New(t)
	addrs.Set("default", "v6", podnet.Address{IP: netip.MustParsePrefix("fd00::9/64"), Family: family.IPv6})
	a := cniserver.Attachment{ContainerID: "c-v6", IfName: "eth0", Netns: pod, PodNamespace: "default", PodName: "v6"}
	if _, err := b.Add(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Del(context.Background(), a) })
	want := map[string]string{"net/ipv6/conf/up1/accept_ra": "2", "net/ipv6/conf/all/forwarding": "1"}
	for k, v := range want {
		if got := readIn(t, host, k); got != v {
			t.Fatalf("after the first IPv6 pod: %s = %s, want %s", k, got, v)
		}
	}

	if _, _, err := j.restore(); err != nil {
		t.Fatal(err)
	}
	want = map[string]string{"net/ipv6/conf/up1/accept_ra": "1", "net/ipv6/conf/all/forwarding": "0"}
	for k, v := range want {
		if got := readIn(t, host, k); got != v {
			t.Errorf("after restore: %s = %s, want %s", k, got, v)
		}
	}
}

func readIn(t *testing.T, ns, key string) string {
	t.Helper()
	v, err := sysctl.Read(ns, key)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
