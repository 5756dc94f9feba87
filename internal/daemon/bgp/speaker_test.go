package bgp

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/estuary-cni/estuary/internal/bgpstatus"
)

func pfx(ss ...string) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func TestDesiredPrefixes(t *testing.T) {
	got := DesiredPrefixes(
		append(addrs("10.1.0.7", "fd00::5", "::ffff:10.1.0.9", "10.1.0.7"), netip.Addr{}),
		append(pfx("10.1.0.0/24", "fd00::/64", "::ffff:10.2.0.0/112", "10.3.0.5/16"), netip.Prefix{}),
	)
	want := pfx("10.1.0.0/24", "10.1.0.7/32", "10.1.0.9/32", "10.2.0.0/16", "10.3.0.0/16", "fd00::/64", "fd00::5/128")
	if !slices.Equal(got, want) {
		t.Fatalf("DesiredPrefixes = %v; want %v", got, want)
	}
	if got := DesiredPrefixes(nil, nil); len(got) != 0 {
		t.Fatalf("DesiredPrefixes(nil, nil) = %v; want none", got)
	}
}

func TestPeerValidation(t *testing.T) {
	neg, big, zero := int32(-1), int32(MaxRestartTime+1), int32(0)
	for _, tc := range []struct {
		name string
		peer Peer
		want string
	}{
		{"no address", Peer{ASN: 1}, "invalid address"},
		{"unspecified", Peer{Address: netip.IPv4Unspecified(), ASN: 1}, "invalid address"},
		{"no asn", Peer{Address: netip.MustParseAddr("10.0.0.1")}, "AS number 0"},
		{"negative restart", Peer{Address: netip.MustParseAddr("10.0.0.1"), ASN: 1, GracefulRestartSeconds: &neg}, "outside"},
		{"long restart", Peer{Address: netip.MustParseAddr("10.0.0.1"), ASN: 1, GracefulRestartSeconds: &big}, "outside"},
		{"ok, gr off", Peer{Address: netip.MustParseAddr("10.0.0.1"), ASN: 1, GracefulRestartSeconds: &zero}, ""},
		{"ok", Peer{Address: netip.MustParseAddr("10.0.0.1"), ASN: 1}, ""},
	} {
		err := tc.peer.validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: validate() = %v; want %q", tc.name, err, tc.want)
		}
	}
	if got := (Peer{}).restartTime(); got != DefaultRestartTime {
		t.Errorf("default restart time %d; want %d", got, DefaultRestartTime)
	}
	if got := (Peer{GracefulRestartSeconds: &zero}).restartTime(); got != 0 {
		t.Errorf("disabled restart time %d; want 0", got)
	}
}

func TestStartRejectsBadConfig(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no router id", Config{LocalASN: 1}},
		{"ipv6 router id", Config{RouterID: netip.MustParseAddr("fd00::1"), LocalASN: 1}},
		{"no asn", Config{RouterID: netip.MustParseAddr("10.0.0.1")}},
		{"v6 next hop for v4", Config{RouterID: netip.MustParseAddr("10.0.0.1"), LocalASN: 1, NextHopIPv4: netip.MustParseAddr("fd00::1")}},
		{"v4 next hop for v6", Config{RouterID: netip.MustParseAddr("10.0.0.1"), LocalASN: 1, NextHopIPv6: netip.MustParseAddr("10.0.0.1")}},
		{"port", Config{RouterID: netip.MustParseAddr("10.0.0.1"), LocalASN: 1, ListenPort: 70000}},
	} {
		if s, err := Start(ctx, tc.cfg, nil, nil); err == nil {
			_ = s.Stop(ctx)
			t.Errorf("%s: Start succeeded", tc.name)
		}
	}
}

// TestSpeakerWithoutPeers runs a real GoBGP server that neither listens nor
// reaches anybody: prefixes and peers are reconciled, idempotently, and the
// collector reports them.
func TestSpeakerWithoutPeers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := Config{
		RouterID:    netip.MustParseAddr("192.0.2.1"),
		LocalASN:    64600,
		NextHopIPv4: netip.MustParseAddr("192.0.2.1"),
		NextHopIPv6: netip.MustParseAddr("2001:db8::1"),
	}
	first := pfx("10.9.0.0/24", "10.9.0.5/32", "fd09::5/128")
	s, err := Start(ctx, cfg, nil, first)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	if got := s.Advertised(); !slices.Equal(got, first) {
		t.Fatalf("Advertised = %v; want %v", got, first)
	}
	if n := localPaths(t, s); n != len(first) {
		t.Fatalf("global RIB holds %d paths; want %d", n, len(first))
	}

	// Nothing answers BGP on this loopback address: the session stays down.
	peer := Peer{Address: netip.MustParseAddr("127.0.0.2"), ASN: 64512}
	second := pfx("10.9.0.0/24", "10.9.0.6/32")
	for range 2 {
		if err := s.Reconcile(ctx, []Peer{peer}, second); err != nil {
			t.Fatalf("Reconcile: %v", err)
		}
		if got := s.Advertised(); !slices.Equal(got, second) {
			t.Fatalf("Advertised = %v; want %v", got, second)
		}
		if n := localPaths(t, s); n != len(second) {
			t.Fatalf("global RIB holds %d paths; want %d", n, len(second))
		}
		peers, err := s.Peers(ctx)
		if err != nil {
			t.Fatalf("Peers: %v", err)
		}
		if len(peers) != 1 || peers[0].Address != peer.Address || peers[0].ASN != peer.ASN || peers[0].Established() {
			t.Fatalf("Peers = %+v; want %s AS %d, not established", peers, peer.Address, peer.ASN)
		}
	}

	// The peer's session, as the daemon's /metrics exports it.
	c := NewNetworksCollector(func(ctx context.Context) (map[string][]bgpstatus.PeerStatus, error) {
		peers, err := s.Peers(ctx)
		return map[string][]bgpstatus.PeerStatus{"fabric": peers}, err
	})
	want := `
# HELP estuary_bgp_advertised_prefixes Prefixes the node's BGP speaker has sent the peer (its Adj-RIB-Out): 0 while the session is down.
# TYPE estuary_bgp_advertised_prefixes gauge
estuary_bgp_advertised_prefixes{network="fabric",peer="127.0.0.2"} 0
# HELP estuary_bgp_peer_up Whether the node's BGP session with the peer is Established (1) or not (0).
# TYPE estuary_bgp_peer_up gauge
estuary_bgp_peer_up{network="fabric",peer="127.0.0.2"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "estuary_bgp_advertised_prefixes", "estuary_bgp_peer_up"); err != nil {
		t.Fatalf("metrics: %v", err)
	}

	// A changed AS number replaces the peer; an empty set removes it.
	peer.ASN = 64513
	if err := s.Reconcile(ctx, []Peer{peer}, nil); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if peers, _ := s.Peers(ctx); len(peers) != 1 || peers[0].ASN != 64513 {
		t.Fatalf("Peers = %+v; want one with AS 64513", peers)
	}
	if err := s.Reconcile(ctx, nil, nil); err != nil {
		t.Fatalf("Reconcile: %v", err)
	}
	if peers, _ := s.Peers(ctx); len(peers) != 0 {
		t.Fatalf("Peers = %+v; want none", peers)
	}
	if n := localPaths(t, s); n != 0 {
		t.Fatalf("global RIB holds %d paths; want 0", n)
	}

	if err := s.Reconcile(ctx, []Peer{peer, peer}, nil); err == nil || !strings.Contains(err.Error(), "listed twice") {
		t.Fatalf("Reconcile with a duplicate peer = %v; want an error", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if err := s.Reconcile(ctx, nil, nil); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Reconcile after Stop = %v; want ErrNotRunning", err)
	}
	if peers, err := s.Peers(ctx); err != nil || len(peers) != 0 {
		t.Fatalf("Peers after Stop = %v, %v; want none", peers, err)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader("")); err != nil {
		t.Fatalf("metrics of a stopped speaker: %v", err)
	}
}

// TestTwoSpeakersShareANamespace shows that speakers that do not listen can
// run side by side.
func TestTwoSpeakersShareANamespace(t *testing.T) {
	ctx := context.Background()
	for i := range 2 {
		s, err := Start(ctx, Config{RouterID: netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)}), LocalASN: 64600}, nil, nil)
		if err != nil {
			t.Fatalf("Start speaker %d: %v", i, err)
		}
		t.Cleanup(func() { _ = s.Stop(ctx) })
	}
}

// localPaths counts the paths in the speaker's global RIB.
func localPaths(t *testing.T, s *Speaker) int {
	t.Helper()
	n := 0
	for _, f := range []bgp.Family{familyIPv4, familyIPv6} {
		err := s.srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_GLOBAL, Family: f},
			func(_ bgp.NLRI, paths []*apiutil.Path) { n += len(paths) })
		if err != nil {
			t.Fatalf("list %s paths: %v", f, err)
		}
	}
	return n
}

// TestStopLogsNoError checks that a clean stop does not log GoBGP's error
// about stopping an instance that is already stopped.
func TestStopLogsNoError(t *testing.T) {
	var (
		mu   sync.Mutex
		logs []string
	)
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logs = append(logs, prefix+args)
	}, funcr.Options{Verbosity: 10})
	ctx := context.Background()
	s, err := Start(ctx, Config{RouterID: netip.MustParseAddr("192.0.2.1"), LocalASN: 64600, Logger: log}, nil, nil)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) == 0 {
		t.Fatal("GoBGP logged nothing; the logger is not wired")
	}
	for _, l := range logs {
		if strings.Contains(l, stopFailedMsg) {
			t.Errorf("logged %q", l)
		}
	}
}
