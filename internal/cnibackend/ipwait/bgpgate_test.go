package ipwait

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/bgpstatus"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

// fakeSessions stands for the node's speakers: the test sets each
// network's peers, and every change closes the channel handed out, as the
// real speakers do.
type fakeSessions struct {
	mu      sync.Mutex
	peers   map[string][]bgpstatus.PeerStatus // absent: no speaker
	changed chan struct{}
	asked   chan string // each network asked about, when someone listens
}

func newFakeSessions() *fakeSessions {
	return &fakeSessions{peers: map[string][]bgpstatus.PeerStatus{}, changed: make(chan struct{}), asked: make(chan string, 64)}
}

func (f *fakeSessions) BGPSessions(_ context.Context, network string) ([]bgpstatus.PeerStatus, bool, <-chan struct{}, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case f.asked <- network:
	default:
	}
	peers, ok := f.peers[network]
	return append([]bgpstatus.PeerStatus(nil), peers...), ok, f.changed, nil
}

func (f *fakeSessions) set(network string, peers ...bgpstatus.PeerStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.peers[network] = peers
	close(f.changed)
	f.changed = make(chan struct{})
}

func peer(addr string, asn uint32, st bgpstatus.SessionState) bgpstatus.PeerStatus {
	return bgpstatus.PeerStatus{Address: netip.MustParseAddr(addr), ASN: asn, State: st}
}

// gated makes the test's waiter one over the same cache gated by f.
func gated(t *testing.T) *fakeSessions {
	t.Helper()
	f := newFakeSessions()
	w, err := New(context.Background(), view, "node-a", f)
	if err != nil {
		t.Fatal(err)
	}
	plain := waiter
	waiter = w
	t.Cleanup(func() { waiter = plain })
	return f
}

// bgpNetwork creates a BGP network and waits until the waiter's cache has it.
func bgpNetwork(t *testing.T, name string, wait *bool) {
	t.Helper()
	n := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: estuaryv1.NetworkSpec{
		Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeBGP, NetID: ptr.To[int64](65010),
		NodeSelector: map[string]string{"bgp": "true"}, BGPPeers: []estuaryv1.BGPPeer{{Address: "10.0.0.1", ASN: 65000}},
		BGPWaitForPeer: wait,
	}}
	if err := k8s.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
	testenv.Eventually(t, "network "+name+" in the waiter's cache", 10*time.Second, func() error {
		return view.Get(context.Background(), client.ObjectKey{Name: name}, &estuaryv1.Network{})
	})
}

// bound records the pod's one address in network.
func bound(t *testing.T, pod, uid, network, ip string) {
	t.Helper()
	recordIn(t, network, "default", pod, uid, "node-a", ip, 1, estuaryv1.IPInstanceBound)
}

// askedAbout waits until the gate has asked f about network: the ADD is
// waiting for its sessions.
func askedAbout(t *testing.T, f *fakeSessions, network string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case n := <-f.asked:
			if n == network {
				return
			}
		case <-timeout:
			t.Fatalf("the gate never asked about network %s", network)
		}
	}
}

func TestGateWaitsForAnEstablishedSession(t *testing.T) {
	f := gated(t)
	bgpNetwork(t, "fabric-wait", nil)
	f.set("fabric-wait", peer("10.0.0.1", 65000, bgpstatus.StateActive), peer("10.0.0.2", 65000, bgpstatus.StateIdle))
	ch := waitAsync("default", "routed", "u20", 20*time.Second)
	bound(t, "routed", "u20", "fabric-wait", "10.9.1.5/24")
	askedAbout(t, f, "fabric-wait")
	select {
	case r := <-ch:
		t.Fatalf("returned %v, %v while no session was Established", r.addrs, r.err)
	default:
	}
	f.set("fabric-wait", peer("10.0.0.1", 65000, bgpstatus.StateActive), peer("10.0.0.2", 65000, bgpstatus.StateEstablished))
	if r := <-ch; r.err != nil || strings.Join(r.addrs, ",") != "10.9.1.5/24" {
		t.Fatalf("got %v %v once a session is Established; want 10.9.1.5/24", r.addrs, r.err)
	}
}

func TestGateTimeoutNamesPodNetworkAndPeers(t *testing.T) {
	f := gated(t)
	bgpNetwork(t, "fabric-down", nil)
	f.set("fabric-down", peer("10.0.0.1", 65000, bgpstatus.StateActive), peer("10.0.0.2", 65001, bgpstatus.StateOpenSent))
	bound(t, "lonely", "u21", "fabric-down", "10.9.1.6/24")
	r := <-waitAsync("default", "lonely", "u21", 500*time.Millisecond)
	for _, want := range []string{"pod default/lonely", "network fabric-down", "node node-a",
		"peer 10.0.0.1 (AS 65000) Active, peer 10.0.0.2 (AS 65001) OpenSent", "spec.bgpWaitForPeer"} {
		if r.err == nil || !strings.Contains(r.err.Error(), want) {
			t.Fatalf("error = %v; want one containing %q", r.err, want)
		}
	}
	if !errors.Is(r.err, context.DeadlineExceeded) || r.addrs != nil {
		t.Fatalf("got %v, %v; want no address and a deadline error", r.addrs, r.err)
	}
	if se := (*SessionError)(nil); !errors.As(r.err, &se) {
		t.Fatalf("error %v is not a SessionError, the mark of a bgp_session failure", r.err)
	}

	// No speaker at all for the network.
	bgpNetwork(t, "fabric-none", nil)
	bound(t, "unplugged", "u22", "fabric-none", "10.9.1.7/24")
	r = <-waitAsync("default", "unplugged", "u22", 500*time.Millisecond)
	if r.err == nil || !strings.Contains(r.err.Error(), "runs no BGP speaker for it") {
		t.Fatalf("error = %v; want one saying the node runs no speaker for the network", r.err)
	}
}

func TestGateSkippedWhenTheNetworkAllowsIt(t *testing.T) {
	f := gated(t)
	bgpNetwork(t, "fabric-nowait", ptr.To(false))
	bound(t, "eager", "u23", "fabric-nowait", "10.9.1.8/24")
	if r := <-waitAsync("default", "eager", "u23", 10*time.Second); r.err != nil || strings.Join(r.addrs, ",") != "10.9.1.8/24" {
		t.Fatalf("got %v %v; want 10.9.1.8/24 without any session", r.addrs, r.err)
	}
	select {
	case n := <-f.asked:
		t.Fatalf("the gate asked about %s for a network with bgpWaitForPeer false", n)
	default:
	}
}
