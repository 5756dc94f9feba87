package datapath

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/bgpstatus"
	"github.com/estuary-cni/estuary/internal/daemon/bgp"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// stateSpeakers starts speakers whose session states the test sets; like
// bgp.Speaker they report each change through Changed and OnPeerChange.
type stateSpeakers struct {
	mu    sync.Mutex
	state bgpstatus.SessionState
	live  []*stateSpeaker
}

type stateSpeaker struct {
	f       *stateSpeakers
	cfg     bgp.Config
	peers   []bgp.Peer
	changed chan struct{}
	stopped bool
}

func (f *stateSpeakers) start(_ context.Context, cfg bgp.Config, peers []bgp.Peer, _ []netip.Prefix) (Speaker, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sp := &stateSpeaker{f: f, cfg: cfg, peers: peers, changed: make(chan struct{})}
	f.live = append(f.live, sp)
	return sp, nil
}

// set changes every session's state and reports it as bgp.Speaker does.
func (f *stateSpeakers) set(st bgpstatus.SessionState) {
	f.mu.Lock()
	f.state = st
	live := f.live
	for _, sp := range live {
		if !sp.stopped {
			close(sp.changed)
			sp.changed = make(chan struct{})
		}
	}
	f.mu.Unlock()
	for _, sp := range live {
		if sp.cfg.OnPeerChange != nil {
			sp.cfg.OnPeerChange()
		}
	}
}

func (s *stateSpeaker) Reconcile(_ context.Context, peers []bgp.Peer, _ []netip.Prefix) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.peers = peers
	return nil
}

func (s *stateSpeaker) Peers(context.Context) ([]bgpstatus.PeerStatus, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	var out []bgpstatus.PeerStatus
	for _, p := range s.peers {
		out = append(out, bgpstatus.PeerStatus{Address: p.Address, ASN: p.ASN, State: s.f.state})
	}
	return out, nil
}

func (s *stateSpeaker) Changed() <-chan struct{} {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	return s.changed
}

func (s *stateSpeaker) Stop(context.Context) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if !s.stopped {
		s.stopped = true
		close(s.changed)
	}
	return nil
}

func TestEncodeBGPPeers(t *testing.T) {
	if v, err := EncodeBGPPeers(nil); err != nil || v != "" {
		t.Fatalf("no network: %q, %v; want \"\"", v, err)
	}
	v, err := EncodeBGPPeers(map[string][]bgpstatus.PeerStatus{
		"z": {{Address: netip.MustParseAddr("10.0.0.10"), ASN: 65001, State: bgpstatus.StateActive},
			{Address: netip.MustParseAddr("10.0.0.9"), ASN: 65000, State: bgpstatus.StateEstablished}},
		"a": {},
	})
	want := `{"a":[],"z":[{"address":"10.0.0.9","asn":65000,"state":"Established"},{"address":"10.0.0.10","asn":65001,"state":"Active"}]}`
	if err != nil || v != want {
		t.Fatalf("EncodeBGPPeers = %s, %v\nwant %s", v, err, want)
	}
}

func TestBGPSessions(t *testing.T) {
	ctx := context.Background()
	fs := &stateSpeakers{state: bgpstatus.StateActive}
	s := NewBGPPart(BGPConfig{Log: logr.Discard()})

	peers, running, changed, err := s.BGPSessions(ctx, "fabric")
	if err != nil || running || peers != nil {
		t.Fatalf("without a speaker: %v, %v, %v; want not running", peers, running, err)
	}
	<-changed // a speaker may start in a later pass: ask again

	sp, _ := fs.start(ctx, bgp.Config{LocalASN: 65010}, []bgp.Peer{{Address: netip.MustParseAddr("10.0.0.1"), ASN: 65000}}, nil)
	s.speakers["fabric"] = speakerState{sp: sp}
	peers, running, changed, err = s.BGPSessions(ctx, "fabric")
	if err != nil || !running || len(peers) != 1 || peers[0].State != bgpstatus.StateActive {
		t.Fatalf("with a speaker: %v, %v, %v; want its Active peer", peers, running, err)
	}
	fs.set(bgpstatus.StateEstablished)
	<-changed
	if peers, _, _, _ = s.BGPSessions(ctx, "fabric"); peers[0].State != bgpstatus.StateEstablished {
		t.Fatalf("after the change: %+v; want Established", peers)
	}

	// A stopped speaker that is still listed (it is being replaced) hands out
	// a recheck, not its closed channel, so callers do not spin.
	_ = sp.Stop(ctx)
	_, _, changed, _ = s.BGPSessions(ctx, "fabric")
	if changed == sp.(*stateSpeaker).changed {
		t.Fatal("the stopped speaker's closed channel was handed out")
	}
}

func TestSyncerPublishesBGPSessionStates(t *testing.T) {
	k8s, c, _ := startEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	fs := &stateSpeakers{state: bgpstatus.StateActive}
	ev := &events{}
	s := newTestLoop(ctx, t, testOptions{Node: "node-a", Port: 8472, Log: logr.Discard(), StartSpeaker: fs.start, Events: ev},
		&fakeDataplane{}, c, k8s, &fakeEndpoints{})
	r1 := map[string]string{"rack": "r1"}
	a := objtest.Labelled(objtest.Node("node-a", "", "", "10.77.0.11"), r1)
	fabric := objtest.UnderlayNet("fabric", estuaryv1.NetworkModeBGP, 65010, r1)
	fabric.Spec.BGPPeers = []estuaryv1.BGPPeer{{Address: "10.77.0.2", ASN: 65000}, {Address: "10.77.0.1", ASN: 65001}}
	create(t, k8s, &a, &fabric)
	a.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.77.0.11"}}
	if err := k8s.Status().Update(ctx, &a); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	annotation := func(want string, present bool) func() error {
		return func() error {
			var n corev1.Node
			if err := k8s.Get(ctx, client.ObjectKey{Name: "node-a"}, &n); err != nil {
				return err
			}
			v, ok := n.Annotations[estuaryv1.AnnotationBGPPeers]
			if ok != present || v != want {
				return fmt.Errorf("annotation %q (present %v), want %q (present %v)", v, ok, want, present)
			}
			return nil
		}
	}
	eventually(t, "the peers' states published on the Node", annotation(
		`{"fabric":[{"address":"10.77.0.1","asn":65001,"state":"Active"},{"address":"10.77.0.2","asn":65000,"state":"Active"}]}`, true))

	// A session state change alone (no API event) is published.
	fs.set(bgpstatus.StateEstablished)
	eventually(t, "the Established sessions published", annotation(
		`{"fabric":[{"address":"10.77.0.1","asn":65001,"state":"Established"},{"address":"10.77.0.2","asn":65000,"state":"Established"}]}`, true))
	if got := ev.list(); len(got) != 0 {
		t.Fatalf("sessions coming up recorded %v", got)
	}

	// Sessions that drop are recorded once each, as Events on the Node.
	fs.set(bgpstatus.StateActive)
	eventually(t, "a BGPSessionDown per peer", func() error {
		if got := ev.list(); len(got) != 2 || !strings.Contains(got[0], ReasonBGPSessionDown) || !strings.Contains(got[1], ReasonBGPSessionDown) {
			return fmt.Errorf("recorded %q", got)
		}
		return nil
	})
	fs.set(bgpstatus.StateEstablished)
	eventually(t, "a BGPSessionUp per peer", func() error {
		if got := ev.list(); len(got) != 4 || !strings.Contains(got[2], ReasonBGPSessionUp) || !strings.Contains(got[3], ReasonBGPSessionUp) {
			return fmt.Errorf("recorded %q", got)
		}
		return nil
	})

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"rack":"r9"}}}`))
	if err := k8s.Patch(ctx, &a, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the annotation removed once the node left the network", annotation("", false))
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
}

// events collects the Events the loop records.
type events struct {
	mu  sync.Mutex
	got []string // "Type Reason: note"
}

func (e *events) Record(eventType, reason, _, note string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, fmt.Sprintf("%s %s: %s", eventType, reason, note))
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.got)
}

// TestNoteBGPSessionsRecordsDownAndUpOnly: sessions that come up after
// the start record nothing; an Established session that drops records one
// BGPSessionDown naming the network, the peer and its state, whatever it
// passes through before it is back; coming back records one BGPSessionUp;
// a peer taken out of the network is forgotten.
func TestNoteBGPSessionsRecordsDownAndUpOnly(t *testing.T) {
	ev := &events{}
	s := NewBGPPart(BGPConfig{Log: logr.Discard(), Events: ev})
	p1, p2 := netip.MustParseAddr("10.77.0.1"), netip.MustParseAddr("10.77.0.2")
	look := func(s1, s2 bgpstatus.SessionState) {
		nets := map[string][]bgpstatus.PeerStatus{"fabric": {{Address: p1, ASN: 65001, State: s1}}}
		if s2 != "" {
			nets["fabric"] = append(nets["fabric"], bgpstatus.PeerStatus{Address: p2, ASN: 65000, State: s2})
		}
		s.noteBGPSessions(nets)
	}
	look(bgpstatus.StateIdle, bgpstatus.StateActive)
	look(bgpstatus.StateEstablished, bgpstatus.StateEstablished)
	look(bgpstatus.StateEstablished, bgpstatus.StateEstablished)
	if got := ev.list(); len(got) != 0 {
		t.Fatalf("sessions coming up after the start recorded %v", got)
	}
	look(bgpstatus.StateActive, bgpstatus.StateEstablished)
	look(bgpstatus.StateConnect, bgpstatus.StateEstablished)
	look(bgpstatus.StateEstablished, bgpstatus.StateEstablished)
	look(bgpstatus.StateEstablished, "")                    // p2 taken out
	look(bgpstatus.StateEstablished, bgpstatus.StateActive) // p2 back, never up since
	want := []string{
		"Warning BGPSessionDown: network fabric: BGP session with peer 10.77.0.1 (AS 65001) is down: Active",
		"Normal BGPSessionUp: network fabric: BGP session with peer 10.77.0.1 (AS 65001) is Established again",
	}
	if got := ev.list(); !slices.Equal(got, want) {
		t.Fatalf("recorded\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
