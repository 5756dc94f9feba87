package datapath

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/bgpstatus"
	"github.com/estuary-cni/estuary/internal/daemon/bgp"
	"github.com/estuary-cni/estuary/internal/daemon/translate"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// fakeUnderlay records the underlay inputs the loop applies.
type fakeUnderlay struct {
	mu     sync.Mutex
	inputs []underlay.Input
	fail   bool
}

func (f *fakeUnderlay) Apply(_ context.Context, in underlay.Input) (desired.Plan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inputs = append(f.inputs, in)
	if f.fail {
		return desired.Plan{}, errors.New("injected failure")
	}
	return desired.Plan{}, nil
}

func (f *fakeUnderlay) last() (underlay.Input, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.inputs) == 0 {
		return underlay.Input{}, 0
	}
	return f.inputs[len(f.inputs)-1], len(f.inputs)
}

// fakeSpeakers starts fake speakers and records their lifecycle.
type fakeSpeakers struct {
	mu   sync.Mutex
	live map[uint32]*fakeSpeaker // by local AS number
}

type fakeSpeaker struct {
	f        *fakeSpeakers
	cfg      bgp.Config
	peers    []bgp.Peer
	prefixes []netip.Prefix
	stopped  bool
}

func newFakeSpeakers() *fakeSpeakers { return &fakeSpeakers{live: map[uint32]*fakeSpeaker{}} }

func (f *fakeSpeakers) start(_ context.Context, cfg bgp.Config, peers []bgp.Peer, prefixes []netip.Prefix) (Speaker, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sp := &fakeSpeaker{f: f, cfg: cfg, peers: peers, prefixes: prefixes}
	f.live[cfg.LocalASN] = sp
	return sp, nil
}

func (s *fakeSpeaker) Reconcile(_ context.Context, peers []bgp.Peer, prefixes []netip.Prefix) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.peers, s.prefixes = peers, prefixes
	return nil
}

func (s *fakeSpeaker) Peers(context.Context) ([]bgpstatus.PeerStatus, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	var out []bgpstatus.PeerStatus
	for _, p := range s.peers {
		out = append(out, bgpstatus.PeerStatus{Address: p.Address, ASN: p.ASN, State: bgpstatus.StateActive})
	}
	return out, nil
}

func (s *fakeSpeaker) Stop(context.Context) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.stopped = true
	return nil
}

// get returns a copy of the speaker of AS asn.
func (f *fakeSpeakers) get(asn uint32) (fakeSpeaker, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sp, ok := f.live[asn]
	if !ok {
		return fakeSpeaker{}, false
	}
	return *sp, true
}

// A deleted subnet stays in Input.Cluster until an Apply succeeded without
// its network, so the agent still owns (and removes) its neighbours and
// addresses.
func TestDeletedSubnetStaysListedUntilApplied(t *testing.T) {
	r1 := map[string]string{"rack": "r1"}
	self := objtest.Labelled(objtest.Node("node-1", "", "", "10.77.0.11"), r1)
	fu := &fakeUnderlay{}
	s := NewUnderlayPart(UnderlayConfig{Node: "node-1", Links: &fakeDataplane{}, Log: logr.Discard()}, fu)
	parent := func() (overlay.Parent, error) { return (&fakeDataplane{}).ResolveParent(overlay.ParentSpec{}) }
	objs := translate.Objects{Networks: []estuaryv1.Network{objtest.UnderlayNet("vlan", "", 0, r1)},
		Subnets: []estuaryv1.Subnet{objtest.Subnet("vlan-a", "vlan", "192.168.10.0/24", nil)}}
	pods := objtest.Addrs("192.168.10.5")
	if err := syncUnderlayOf(s, &self, objs, pods, parent); err != nil {
		t.Fatal(err)
	}
	if in, _ := fu.last(); in.Uplink != "eth0" || len(in.NodeAddrs) != 1 || in.NodeAddrs[0].Dev != "eth0" {
		t.Fatalf("uplink %q, node addresses %v; want the tunnel parent eth0 and its address", in.Uplink, in.NodeAddrs)
	}
	gone := translate.Objects{}
	fu.fail = true
	for range 2 {
		if err := syncUnderlayOf(s, &self, gone, nil, parent); err == nil {
			t.Fatal("injected failure not reported")
		}
		if in, _ := fu.last(); len(in.Networks) != 0 || len(in.Cluster) != 1 || in.Cluster[0].Name != "vlan-a" {
			t.Fatalf("after the network's deletion: %+v; want no network and vlan-a still listed", in)
		}
	}
	fu.fail = false
	if err := syncUnderlayOf(s, &self, gone, nil, parent); err != nil {
		t.Fatal(err)
	}
	in, n := fu.last()
	if len(in.Cluster) != 1 {
		t.Fatalf("cluster %+v; want vlan-a until an Apply without it succeeded", in.Cluster)
	}
	// Once an empty input is applied, an unchanged one is not applied again.
	if err := syncUnderlayOf(s, &self, gone, nil, parent); err != nil {
		t.Fatal(err)
	}
	if _, again := fu.last(); again != n {
		t.Fatalf("%d applies after an unchanged empty input, want %d", again, n)
	}
	if err := syncUnderlayOf(s, &self, objs, pods, parent); err != nil {
		t.Fatal(err)
	}
	if in, again := fu.last(); again != n+1 || len(in.Networks) != 1 {
		t.Fatalf("%d applies, last %+v; want the network applied again", again, in)
	}
}

// syncUnderlayOf runs the underlay part as a pass does, on a snapshot of
// the node's objects and pods.
func syncUnderlayOf(s *UnderlayPart, node *corev1.Node, objs translate.Objects, pods []netip.Addr, parent func() (overlay.Parent, error)) error {
	snap := NewSnapshot(node.Name, objs, nil, parent)
	snap.Self, snap.Pods = node, pods
	return s.Sync(context.Background(), snap)
}
