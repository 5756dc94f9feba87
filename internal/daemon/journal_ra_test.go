package daemon

import (
	"net/netip"
	"os"
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/sysctl"
	"github.com/estuary-cni/estuary/test/infra/nstest"
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

	plumber := podnet.NewPlumber(host)
	pod := nstest.New(t)
	s := podnet.Spec{ContainerID: "c-v6", IfName: "eth0", Netns: pod, IPs: []netip.Addr{netip.MustParseAddr("fd00::9")}}
	if _, err := plumber.Plumb(s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plumber.Unplumb(s.HostVeth()) })
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
