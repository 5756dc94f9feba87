package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/bgpstatus"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// The router side of TestSpeakerAgainstBird: bird2 in its own namespace,
// joined to the node's namespace by a veth.
const (
	routerAddr  = "10.90.0.1"
	nodeAddr    = "10.90.0.2"
	routerAddr6 = "fd00:90::1"
	nodeAddr6   = "fd00:90::2"
	deadAddr    = "10.90.0.3" // on the link, but nobody has it
	routerASN   = 64512
	nodeASN     = 64600
	birdProto   = "node"
	// md5Password protects the session (TCP MD5, RFC 2385).
	md5Password = "estuary-test"
	// offeredRoute is the one route bird sends the node, which must not
	// enter the node's RIB.
	offeredRoute = "192.0.2.0/24"
)

// nodeSideEnv carries bird's control socket to the copy of the test binary
// that runs inside the node's namespace.
const nodeSideEnv = "ESTUARY_BGP_TEST_BIRD_SOCKET"

// birdLink makes a router and a node namespace joined by a veth pair (eth0
// on both sides) with IPv6 addresses and, with ipv4, IPv4 ones; it skips
// the test without root, bird2 or iproute2.
func birdLink(t *testing.T, ipv4 bool) (router, node string) {
	t.Helper()
	nstest.RequireRoot(t)
	for _, bin := range []string{"bird", "birdc", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s (Debian package bird2 / iproute2): %v", bin, err)
		}
	}
	router = filepath.Base(nstest.New(t))
	node = filepath.Base(nstest.New(t))
	cmds := [][]string{
		{"-n", router, "link", "set", "lo", "up"},
		{"-n", node, "link", "set", "lo", "up"},
		{"-n", router, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", node},
		{"-n", router, "addr", "add", routerAddr6 + "/64", "dev", "eth0", "nodad"},
		{"-n", node, "addr", "add", nodeAddr6 + "/64", "dev", "eth0", "nodad"},
	}
	if ipv4 {
		cmds = append(cmds, []string{"-n", router, "addr", "add", routerAddr + "/24", "dev", "eth0"},
			[]string{"-n", node, "addr", "add", nodeAddr + "/24", "dev", "eth0"})
	}
	cmds = append(cmds, []string{"-n", router, "link", "set", "eth0", "up"}, []string{"-n", node, "link", "set", "eth0", "up"})
	for _, args := range cmds {
		run(t, "ip", args...)
	}
	return router, node
}

// TestSpeakerAgainstBird runs the speaker against a real bird2 router.
//
// GoBGP dials its peers from goroutines of its own, on whatever OS thread the
// runtime picks, so entering the node's namespace on one locked thread is not
// enough: the test binary runs itself again under `ip netns exec`, which puts
// the whole process, every thread, in the node's namespace. The outer run
// builds the namespaces and bird; the inner run (nodeSideEnv set) drives the
// speaker and reads bird's routes over its control socket, which works from
// any namespace.
func TestSpeakerAgainstBird(t *testing.T) {
	if sock := os.Getenv(nodeSideEnv); sock != "" {
		nodeSide(t, sock)
		return
	}
	router, node := birdLink(t, true)
	sock := startBird(t, router)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatalf("find the test binary: %v", err)
	}
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", node, self,
		"-test.run=^TestSpeakerAgainstBird$", "-test.v", "-test.count=1", "-test.timeout=4m")
	cmd.Env = append(os.Environ(), nodeSideEnv+"="+sock)
	out, err := cmd.CombinedOutput()
	t.Logf("node side:\n%s", out)
	if err != nil {
		t.Fatalf("node side failed: %v", err)
	}
	if !strings.Contains(string(out), "--- PASS: TestSpeakerAgainstBird") {
		t.Fatal("node side did not report a pass")
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// startBird runs bird in the router namespace with one passive eBGP session
// to the node, TCP MD5 protected, graceful restart on, and no kernel
// protocol: learned routes stay in bird's table. It offers the node one
// route, offeredRoute, and returns bird's control socket.
func startBird(t *testing.T, ns string) string {
	t.Helper()
	text := fmt.Sprintf(`log stderr all;
router id %[1]s;
protocol device { scan time 1; }
protocol static offered { ipv4; route %[7]s blackhole; }
protocol bgp %[2]s {
  local %[1]s as %[3]d;
  neighbor %[4]s as %[5]d;
  passive on;
  password "%[6]s";
  graceful restart on;
  ipv4 { import all; export where proto = "offered"; };
  ipv6 { import all; export none; };
}
`, routerAddr, birdProto, routerASN, nodeAddr, nodeASN, md5Password, offeredRoute)
	return runBird(t, ns, text)
}

// runBird runs bird with the configuration text in ns until the test ends
// and returns its control socket once it answers.
func runBird(t *testing.T, ns, text string) string {
	t.Helper()
	dir := t.TempDir()
	conf := filepath.Join(dir, "bird.conf")
	sock := filepath.Join(dir, "bird.ctl")
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	cmd := exec.Command("ip", "netns", "exec", ns, "bird", "-f", "-c", conf, "-s", sock, "-P", filepath.Join(dir, "bird.pid"))
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start bird: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("bird log:\n%s", logs.String())
		}
	})
	waitFor(t, 10*time.Second, "bird's control socket", func() error {
		_, err := birdc(sock, "show", "status")
		return err
	})
	return sock
}

// nodeSide is the part of TestSpeakerAgainstBird that runs inside the node's
// namespace.
func nodeSide(t *testing.T, sock string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := Config{
		RouterID:    netip.MustParseAddr(nodeAddr),
		LocalASN:    nodeASN,
		NextHopIPv4: netip.MustParseAddr(nodeAddr),
		NextHopIPv6: netip.MustParseAddr(nodeAddr6),
	}
	router := Peer{Address: netip.MustParseAddr(routerAddr), ASN: routerASN, Password: md5Password}
	// A dual-stack node: its IPv6 pods' /128s ride the IPv4 session with
	// the node's IPv6 address as next hop.
	pods := addrs("10.244.1.10", "10.244.1.11", "10.244.1.12", "fd00:244:1::10")
	subnets := pfx("10.244.1.0/24", "fd00:244:1::/64")
	all := DesiredPrefixes(pods, subnets)

	var changes atomic.Int64
	cfg.OnPeerChange = func() { changes.Add(1) }
	s, err := Start(ctx, cfg, []Peer{router}, all)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })

	// The session state changes alone, without polling, lead to Established.
	establishedByChanges(ctx, t, s, router.Address)
	if changes.Load() == 0 {
		t.Error("OnPeerChange was never called while the session came up")
	}
	waitFor(t, 30*time.Second, "bird to say the session is Established", func() error {
		return birdEstablished(sock, true)
	})
	waitFor(t, 30*time.Second, "bird to learn every prefix via "+nodeAddr, func() error {
		return birdHas(sock, all, nil)
	})
	// The node counts bird's route but keeps it out of its RIB.
	waitFor(t, 30*time.Second, "the node to receive "+offeredRoute, func() error {
		st, err := peerState(ctx, s, router.Address)
		if err != nil {
			return err
		}
		if st.Received != 1 || st.Advertised != uint64(len(all)) {
			return fmt.Errorf("router: %+v; want 1 received, %d advertised", st, len(all))
		}
		return nil
	})
	if n := localPaths(t, s); n != len(all) {
		t.Fatalf("the node's RIB holds %d paths; want only its own %d", n, len(all))
	}

	// Withdraw one pod.
	gone := netip.MustParsePrefix("10.244.1.11/32")
	left := DesiredPrefixes(addrs("10.244.1.10", "10.244.1.12", "fd00:244:1::10"), subnets)
	if err := s.Reconcile(ctx, []Peer{router}, left); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	waitFor(t, 30*time.Second, "bird to drop "+gone.String(), func() error {
		return birdHas(sock, left, []netip.Prefix{gone})
	})
	// The same input again changes nothing.
	if err := s.Reconcile(ctx, []Peer{router}, left); err != nil {
		t.Fatalf("repeated Reconcile: %v", err)
	}
	if err := birdHas(sock, left, []netip.Prefix{gone}); err != nil {
		t.Fatalf("after a repeated Reconcile: %v", err)
	}

	// A peer that does not answer is listed, not Established.
	dead := Peer{Address: netip.MustParseAddr(deadAddr), ASN: routerASN + 1}
	if err := s.Reconcile(ctx, []Peer{router, dead}, left); err != nil {
		t.Fatalf("Reconcile adding %s: %v", dead.Address, err)
	}
	waitFor(t, 30*time.Second, "the dead peer to be tried", func() error {
		st, err := peerState(ctx, s, dead.Address)
		if err != nil {
			return err
		}
		if st.State != bgpstatus.StateConnect && st.State != bgpstatus.StateActive {
			return fmt.Errorf("%s is %s", dead.Address, st.State)
		}
		return nil
	})
	peers, err := s.Peers(ctx)
	if err != nil {
		t.Fatalf("Peers: %v", err)
	}
	for _, p := range peers {
		switch p.Address {
		case router.Address:
			if !p.Established() || p.Advertised != uint64(len(left)) || !p.GracefulRestart {
				t.Errorf("router: %+v; want Established, %d advertised, graceful restart", p, len(left))
			}
		case dead.Address:
			if p.Established() || p.ASN != dead.ASN {
				t.Errorf("dead peer: %+v; want not Established, AS %d", p, dead.ASN)
			}
		default:
			t.Errorf("unexpected peer %+v", p)
		}
	}
	if len(peers) != 2 {
		t.Fatalf("Peers = %+v; want the router and the dead peer", peers)
	}
	if err := s.Reconcile(ctx, []Peer{router}, left); err != nil {
		t.Fatalf("Reconcile removing %s: %v", dead.Address, err)
	}

	// Restart: bird keeps the routes (stale) from Stop until the new speaker
	// has synced, and after.
	watch := watchRoutes(sock, left)
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-s.Changed():
	default:
		t.Error("Changed is not closed after Stop")
	}
	waitFor(t, 30*time.Second, "bird to see the session go down", func() error {
		return birdEstablished(sock, false)
	})
	if err := birdHas(sock, left, nil); err != nil {
		t.Fatalf("bird dropped routes while the speaker was down: %v", err)
	}
	logBird(t, sock, "while the speaker is down")
	cfg.Restarting = true
	s2, err := Start(ctx, cfg, []Peer{router}, left)
	if err != nil {
		t.Fatalf("second Start: %v", err)
	}
	t.Cleanup(func() { _ = s2.Stop(context.Background()) })
	waitEstablished(t, s2, router.Address)
	waitFor(t, 30*time.Second, "bird to say the new session is Established", func() error {
		return birdEstablished(sock, true)
	})
	waitFor(t, 60*time.Second, "bird to finish graceful restart with every route fresh", func() error {
		if err := birdHas(sock, left, []netip.Prefix{gone}); err != nil {
			return err
		}
		return birdNotRestarting(sock)
	})
	logBird(t, sock, "after the restart")
	if missing := watch(); len(missing) > 0 {
		t.Fatalf("bird lost routes during the restart: %s", strings.Join(missing, "; "))
	}

	// Removing the peer is not a restart: the session is deconfigured and
	// bird forgets the routes at once.
	if err := s2.Reconcile(ctx, nil, left); err != nil {
		t.Fatalf("Reconcile removing the router: %v", err)
	}
	waitFor(t, 30*time.Second, "bird to drop every route of the removed session", func() error {
		return birdHas(sock, nil, left)
	})
	if err := birdNotRestarting(sock); err != nil {
		t.Fatalf("bird treats a removed peer as restarting: %v", err)
	}
}

// establishedByChanges waits for the session with peer to be Established,
// reading the peers only when Changed says a session state changed.
func establishedByChanges(ctx context.Context, t *testing.T, s *Speaker, peer netip.Addr) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		changed := s.Changed()
		st, err := peerState(ctx, s, peer)
		if err == nil && st.Established() {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			t.Fatalf("session with %s not Established after its state changes (last %+v, %v): %v", peer, st, err, ctx.Err())
		}
	}
}

func waitEstablished(t *testing.T, s *Speaker, peer netip.Addr) {
	t.Helper()
	waitFor(t, 60*time.Second, "session with "+peer.String()+" to be Established", func() error {
		st, err := peerState(context.Background(), s, peer)
		if err != nil {
			return err
		}
		if !st.Established() {
			return fmt.Errorf("%s is %s", peer, st.State)
		}
		return nil
	})
}

func peerState(ctx context.Context, s *Speaker, addr netip.Addr) (bgpstatus.PeerStatus, error) {
	peers, err := s.Peers(ctx)
	if err != nil {
		return bgpstatus.PeerStatus{}, err
	}
	for _, p := range peers {
		if p.Address == addr {
			return p, nil
		}
	}
	return bgpstatus.PeerStatus{}, fmt.Errorf("%s not among the peers %+v", addr, peers)
}

// waitFor polls cond until it returns nil or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// watchRoutes polls bird until the returned function is called, which
// reports every moment one of want was missing.
func watchRoutes(sock string, want []netip.Prefix) func() []string {
	var (
		mu      sync.Mutex
		missing []string
	)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if err := birdHas(sock, want, nil); err != nil {
				mu.Lock()
				missing = append(missing, time.Now().Format("15:04:05.000")+" "+err.Error())
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return func() []string {
		close(stop)
		<-done
		mu.Lock()
		defer mu.Unlock()
		return missing
	}
}

func birdc(sock string, args ...string) (string, error) {
	out, err := exec.Command("birdc", append([]string{"-s", sock}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("birdc %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// birdEstablished checks that bird's session with the node is (or, with up
// false, is not) Established.
func birdEstablished(sock string, up bool) error {
	out, err := birdc(sock, "show", "protocols", birdProto)
	if err != nil {
		return err
	}
	if strings.Contains(out, "Established") != up {
		return fmt.Errorf("bird: %s", strings.TrimSpace(out))
	}
	return nil
}

// birdNotRestarting checks that bird no longer waits for the node to finish
// a graceful restart.
func birdNotRestarting(sock string) error {
	out, err := birdc(sock, "show", "protocols", "all", birdProto)
	if err != nil {
		return err
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "graceful restart") && strings.Contains(l, "active") ||
			strings.Contains(l, "Neighbor graceful restart active") {
			return fmt.Errorf("bird: %s", strings.TrimSpace(l))
		}
	}
	return nil
}

// birdHas checks that bird holds a route for every prefix of want with next
// hop nodeAddr, and none for the prefixes of absent.
func birdHas(sock string, want, absent []netip.Prefix) error {
	out, err := birdc(sock, "show", "route", "all", "protocol", birdProto)
	if err != nil {
		return err
	}
	routes := parseBirdRoutes(out)
	for _, p := range want {
		r, ok := routes[p]
		if !ok {
			return fmt.Errorf("bird has no route for %s", p)
		}
		nh := nodeAddr
		if p.Addr().Is6() {
			nh = nodeAddr6
		}
		if !strings.Contains(r, "BGP.next_hop: "+nh) {
			return fmt.Errorf("bird's route for %s does not go via %s:\n%s", p, nh, r)
		}
	}
	for _, p := range absent {
		if _, ok := routes[p]; ok {
			return fmt.Errorf("bird still has a route for %s", p)
		}
	}
	return nil
}

// parseBirdRoutes splits `show route all` output into one text block per
// prefix.
func parseBirdRoutes(out string) map[netip.Prefix]string {
	routes := map[netip.Prefix]string{}
	var cur netip.Prefix
	for _, l := range strings.Split(out, "\n") {
		if l == "" {
			continue
		}
		if l[0] != ' ' && l[0] != '\t' {
			cur = netip.Prefix{}
			if f := strings.Fields(l); len(f) > 0 {
				if p, err := netip.ParsePrefix(f[0]); err == nil {
					cur = p
				}
			}
		}
		if cur.IsValid() {
			routes[cur] += l + "\n"
		}
	}
	return routes
}

// logBird logs bird's view of the session and its routes.
func logBird(t *testing.T, sock, when string) {
	t.Helper()
	proto, err := birdc(sock, "show", "protocols", "all", birdProto)
	if err != nil {
		t.Fatal(err)
	}
	routes, err := birdc(sock, "show", "route", "all", "protocol", birdProto)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bird %s:\n%s\n%s", when, proto, routes)
}
