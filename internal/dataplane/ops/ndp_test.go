package ops

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// ndpPair is arpPair with fd00:9::1/64 on a0 and fd00:9::2/64 on b0, both
// usable at once (no duplicate address detection).
func ndpPair(t *testing.T) (h *Handle, other string, bMAC net.HardwareAddr) {
	t.Helper()
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		t.Skipf("kernel without IPv6 (%v)", err)
	}
	h, other, bMAC = arpPair(t)
	ipIn(t, h.c.ns, "addr", "add", "fd00:9::1/64", "dev", "a0", "nodad")
	ipIn(t, other, "addr", "add", "fd00:9::2/64", "dev", "b0", "nodad")
	return h, other, bMAC
}

func TestNDPProbe(t *testing.T) {
	h, other, bMAC := ndpPair(t)
	ctx := context.Background()
	mac, err := h.Segment().NDPProbe(ctx, "a0", netip.MustParseAddr("fd00:9::2"), 2*time.Second)
	if err != nil || mac.String() != bMAC.String() {
		t.Errorf("probe of a held address = %v, %v; want %s", mac, err, bMAC)
	}
	start := time.Now()
	mac, err = h.Segment().NDPProbe(ctx, "a0", netip.MustParseAddr("fd00:9::3"), 500*time.Millisecond)
	if err != nil || mac != nil {
		t.Errorf("probe of a free address = %v, %v; want none", mac, err)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 2*time.Second {
		t.Errorf("probe of a free address took %v, want about 500ms", d)
	}
	// A node still proxying an address that moved answers for it.
	nstest.Exec(t, other, "sysctl", "-qw", "net.ipv6.conf.b0.forwarding=1", "net.ipv6.conf.b0.proxy_ndp=1")
	ipIn(t, other, "-6", "neigh", "add", "proxy", "fd00:9::8", "dev", "b0")
	if mac, err := h.Segment().NDPProbe(ctx, "a0", netip.MustParseAddr("fd00:9::8"), 2*time.Second); err != nil || mac.String() != bMAC.String() {
		t.Errorf("probe of a proxied address = %v, %v; want %s", mac, err, bMAC)
	}
	// The prober's own kernel does not see the probe it sends.
	if mac, err := h.Segment().NDPProbe(ctx, "a0", netip.MustParseAddr("fd00:9::1"), 300*time.Millisecond); err != nil || mac != nil {
		t.Errorf("probe of the prober's own address = %v, %v; want none", mac, err)
	}
	if _, err := h.Segment().NDPProbe(ctx, "nope0", netip.MustParseAddr("fd00:9::3"), time.Second); err == nil ||
		!strings.Contains(err.Error(), "nope0") || !strings.Contains(err.Error(), "fd00:9::3") {
		t.Errorf("probe on a missing link = %v", err)
	}
}

// TestNDPResolve: the target answers, and learns the sender given, one of
// a0's addresses or one a0 does not hold (as for a pod's address).
func TestNDPResolve(t *testing.T) {
	h, other, bMAC := ndpPair(t)
	a, err := h.Links().Get("a0")
	if err != nil {
		t.Fatal(err)
	}
	target := netip.MustParseAddr("fd00:9::2")
	for _, sender := range []string{"fd00:9::1", "fd00:9::5"} {
		mac, err := h.Segment().NDPResolve(context.Background(), "a0", netip.MustParseAddr(sender), target, 2*time.Second)
		if err != nil || mac.String() != bMAC.String() {
			t.Fatalf("resolve from %s = %v, %v; want %s", sender, mac, err, bMAC)
		}
		if out := ipIn(t, other, "-6", "neigh", "show", sender, "dev", "b0"); !strings.Contains(out, a.MAC.String()) {
			t.Errorf("target did not learn the sender %s: %q", sender, out)
		}
	}
	if mac, err := h.Segment().NDPResolve(context.Background(), "a0", netip.MustParseAddr("fd00:9::1"),
		netip.MustParseAddr("fd00:9::3"), 300*time.Millisecond); err != nil || mac != nil {
		t.Errorf("resolve of a free address = %v, %v; want none", mac, err)
	}
}

// TestUnsolicitedNA: a peer's stale entry for the address moves to our
// MAC. A peer without an entry creates none; one that forwards does with
// accept_untracked_na (RFC 9131), where the kernel has it.
func TestUnsolicitedNA(t *testing.T) {
	h, other, _ := ndpPair(t)
	a, err := h.Links().Get("a0")
	if err != nil {
		t.Fatal(err)
	}
	held, untracked := netip.MustParseAddr("fd00:9::1"), netip.MustParseAddr("fd00:9::7")
	ipIn(t, other, "-6", "neigh", "replace", held.String(), "lladdr", "02:00:00:00:00:01", "dev", "b0", "nud", "stale")
	for _, ip := range []netip.Addr{untracked, held} {
		if err := h.Segment().UnsolicitedNA("a0", ip); err != nil {
			t.Fatal(err)
		}
	}
	waitNeigh(t, other, held, a.MAC)
	// Sent first, the advertisement for the untracked address has been
	// handled by now; were it late, the check would pass, never fail.
	if out := ipIn(t, other, "-6", "neigh", "show", untracked.String(), "dev", "b0"); strings.TrimSpace(out) != "" {
		t.Errorf("entry created for an untracked address: %q", out)
	}
	if _, err := os.Stat("/proc/sys/net/ipv6/conf/default/accept_untracked_na"); err != nil {
		t.Logf("kernel without accept_untracked_na: untracked case left out")
		return
	}
	nstest.Exec(t, other, "sysctl", "-qw", "net.ipv6.conf.b0.forwarding=1", "net.ipv6.conf.b0.accept_untracked_na=1")
	if err := h.Segment().UnsolicitedNA("a0", untracked); err != nil {
		t.Fatal(err)
	}
	waitNeigh(t, other, untracked, a.MAC)
}

// waitNeigh waits up to two seconds for ns's entry for ip on b0 to hold mac.
func waitNeigh(t *testing.T, ns string, ip netip.Addr, mac net.HardwareAddr) {
	t.Helper()
	var out string
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out = ipIn(t, ns, "-6", "neigh", "show", ip.String(), "dev", "b0"); strings.Contains(out, mac.String()) {
			return
		}
	}
	t.Errorf("peer's entry for %s after an unsolicited NA = %q, want %s", ip, out, mac)
}
