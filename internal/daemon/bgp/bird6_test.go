package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// nodeSide6Env carries bird's control socket to the node side of
// TestSpeakerAgainstBirdOverIPv6.
const nodeSide6Env = "ESTUARY_BGP_TEST_BIRD6_SOCKET"

// TestSpeakerAgainstBirdOverIPv6 runs the speaker of an IPv6-only node
// against bird over an IPv6 session: the router id comes from the node's
// IPv6 address (RouterIDFromIPv6), a pod's /128 and its subnet are
// announced with the node's IPv6 address as next hop, and a pod that goes
// is withdrawn. The node side runs in a copy of the test binary inside the
// node's namespace (see TestSpeakerAgainstBird).
func TestSpeakerAgainstBirdOverIPv6(t *testing.T) {
	if sock := os.Getenv(nodeSide6Env); sock != "" {
		nodeSide6(t, sock)
		return
	}
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		t.Skipf("kernel without IPv6 (%v)", err)
	}
	router, node := birdLink(t, false)
	sock := runBird(t, router, fmt.Sprintf(`log stderr all;
router id 0.0.0.1;
protocol device { scan time 1; }
protocol bgp %[1]s {
  local %[2]s as %[3]d;
  neighbor %[4]s as %[5]d;
  passive on;
  ipv6 { import all; export none; };
}
`, birdProto, routerAddr6, routerASN, nodeAddr6, nodeASN))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("find the test binary: %v", err)
	}
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", node, self,
		"-test.run=^TestSpeakerAgainstBirdOverIPv6$", "-test.v", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), nodeSide6Env+"="+sock)
	out, err := cmd.CombinedOutput()
	t.Logf("node side:\n%s", out)
	if err != nil {
		t.Fatalf("node side failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestSpeakerAgainstBirdOverIPv6") {
		t.Fatal("node side did not report a pass")
	}
}

// nodeSide6 is the part of TestSpeakerAgainstBirdOverIPv6 that runs inside
// the node's namespace.
func nodeSide6(t *testing.T, sock string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id, ok := RouterIDFromIPv6(netip.MustParseAddr(nodeAddr6))
	if !ok || id != netip.MustParseAddr("0.0.0.2") {
		t.Fatalf("RouterIDFromIPv6(%s) = %s, %t; want 0.0.0.2", nodeAddr6, id, ok)
	}
	cfg := Config{RouterID: id, LocalASN: nodeASN, NextHopIPv6: netip.MustParseAddr(nodeAddr6)}
	router := Peer{Address: netip.MustParseAddr(routerAddr6), ASN: routerASN}
	subnets := pfx("fd00:244:1::/64")
	all := DesiredPrefixes(addrs("fd00:244:1::10", "fd00:244:1::11"), subnets)
	s, err := Start(ctx, cfg, []Peer{router}, all)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	waitEstablished(t, s, router.Address)
	waitFor(t, 30*time.Second, "bird to learn every prefix via "+nodeAddr6, func() error {
		return birdHas(sock, all, nil)
	})
	gone := netip.MustParsePrefix("fd00:244:1::11/128")
	left := DesiredPrefixes(addrs("fd00:244:1::10"), subnets)
	if err := s.Reconcile(ctx, []Peer{router}, left); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	waitFor(t, 30*time.Second, "bird to drop "+gone.String(), func() error {
		return birdHas(sock, left, []netip.Prefix{gone})
	})
	logBird(t, sock, "after the withdrawal")
}
