package ops

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// arpPair returns a handle on a namespace holding a0 (10.9.0.1/24) whose
// peer b0 (10.9.0.2/24) is in a second namespace, and b0's MAC.
func arpPair(t *testing.T) (h *Handle, other string, bMAC net.HardwareAddr) {
	t.Helper()
	aPath, bPath := nstest.New(t), nstest.New(t)
	a, err := Open(aPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	b, err := Open(bPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if err := a.Devices().AddVethPeerIn("a0", nil, "b0", nil, bPath, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(desired.Plan{AddAddrs: []desired.Addr{{Dev: "a0", Prefix: netip.MustParsePrefix("10.9.0.1/24")}}}); err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(desired.Plan{AddAddrs: []desired.Addr{{Dev: "b0", Prefix: netip.MustParsePrefix("10.9.0.2/24")}}}); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		h    *Handle
		name string
	}{{a, "a0"}, {b, "b0"}} {
		if err := x.h.Links().SetUp(x.name); err != nil {
			t.Fatal(err)
		}
	}
	l, err := b.Links().Get("b0")
	if err != nil {
		t.Fatal(err)
	}
	return a, bPath, l.MAC
}

func ipIn(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", append([]string{"-n", filepath.Base(ns)}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func TestARPProbe(t *testing.T) {
	h, _, bMAC := arpPair(t)
	ctx := context.Background()
	mac, err := h.Segment().ARPProbe(ctx, "a0", netip.MustParseAddr("10.9.0.2"), 2*time.Second)
	if err != nil || mac.String() != bMAC.String() {
		t.Errorf("probe of a held address = %v, %v; want %s", mac, err, bMAC)
	}
	start := time.Now()
	mac, err = h.Segment().ARPProbe(ctx, "a0", netip.MustParseAddr("10.9.0.3"), 500*time.Millisecond)
	if err != nil || mac != nil {
		t.Errorf("probe of a free address = %v, %v; want none", mac, err)
	}
	if d := time.Since(start); d < 400*time.Millisecond || d > 2*time.Second {
		t.Errorf("probe of a free address took %v, want about 500ms", d)
	}
	if _, err := h.Segment().ARPProbe(ctx, "nope0", netip.MustParseAddr("10.9.0.3"), time.Second); err == nil ||
		!strings.Contains(err.Error(), "nope0") {
		t.Errorf("probe on a missing link = %v", err)
	}
}

// TestARPResolve: the target answers, and learns the sender given.
func TestARPResolve(t *testing.T) {
	h, other, bMAC := arpPair(t)
	aMAC, err := h.Links().Get("a0")
	if err != nil {
		t.Fatal(err)
	}
	mac, err := h.Segment().ARPResolve(context.Background(), "a0", netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2"), 2*time.Second)
	if err != nil || mac.String() != bMAC.String() {
		t.Fatalf("resolve = %v, %v; want %s", mac, err, bMAC)
	}
	if out := ipIn(t, other, "neigh", "show", "10.9.0.1"); !strings.Contains(out, aMAC.MAC.String()) {
		t.Errorf("target did not learn the sender: %q", out)
	}
}

// TestGratuitousARP: a peer's stale entry for the address moves to our MAC.
func TestGratuitousARP(t *testing.T) {
	h, other, _ := arpPair(t)
	a, err := h.Links().Get("a0")
	if err != nil {
		t.Fatal(err)
	}
	ipIn(t, other, "neigh", "replace", "10.9.0.1", "lladdr", "02:00:00:00:00:01", "dev", "b0", "nud", "stale")
	if err := h.Segment().GratuitousARP("a0", netip.MustParseAddr("10.9.0.1")); err != nil {
		t.Fatal(err)
	}
	var out string
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out = ipIn(t, other, "neigh", "show", "10.9.0.1"); strings.Contains(out, a.MAC.String()) {
			return
		}
	}
	t.Errorf("peer's entry after a gratuitous ARP = %q, want %s", out, a.MAC)
}

func TestParseARP(t *testing.T) {
	if _, ok := parseARP(make([]byte, 10)); ok {
		t.Error("parsed a short frame")
	}
	if err := (&Segment{}).GratuitousARP("x", netip.MustParseAddr("fd00::1")); err == nil {
		t.Error("gratuitous ARP for IPv6 accepted")
	}
}
