package netsync

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/bgp"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/state"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
)

// fakeUnderlay records the underlay inputs the loop applies.
type fakeUnderlay struct {
	mu     sync.Mutex
	inputs []underlay.Input
	fail   bool
}

func (f *fakeUnderlay) Apply(_ context.Context, in underlay.Input) (state.Plan, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inputs = append(f.inputs, in)
	if f.fail {
		return state.Plan{}, errors.New("injected failure")
	}
	return state.Plan{}, nil
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

func (s *fakeSpeaker) Peers(context.Context) ([]bgp.PeerStatus, error) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	var out []bgp.PeerStatus
	for _, p := range s.peers {
		out = append(out, bgp.PeerStatus{Address: p.Address, ASN: p.ASN, State: bgp.StateActive})
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

func labelled(n corev1.Node, labels map[string]string) corev1.Node {
	n.Labels = labels
	return n
}

func underlayNet(name string, mode estuaryv1.NetworkMode, netID int64, sel map[string]string) estuaryv1.Network {
	n := network(name, estuaryv1.NetworkTypeUnderlay, netID)
	n.Spec.Mode, n.Spec.NodeSelector = mode, sel
	return n
}

func bgpNet(name string, asn int64, sel map[string]string, peers ...string) estuaryv1.Network {
	n := underlayNet(name, estuaryv1.NetworkModeBGP, asn, sel)
	for _, p := range peers {
		n.Spec.BGPPeers = append(n.Spec.BGPPeers, estuaryv1.BGPPeer{Address: p, ASN: 65000})
	}
	return n
}

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func TestBuildUnderlayInput(t *testing.T) {
	r1 := map[string]string{"rack": "r1"}
	self := labelled(node("node-1", "", "", "10.77.0.11"), r1)
	deleting := underlayNet("gone", "", 7, r1)
	deleting.DeletionTimestamp = &metav1.Time{}
	yes := true
	vlanB := subnet("vlan-b", "vlan", "192.168.11.0/24", &yes)
	id := int64(101)
	vlanB.Spec.NetID = &id
	vlanA := subnet("vlan-a", "vlan", "192.168.10.0/24", nil)
	vlanA.Spec.Range.Gateway = "192.168.10.1"
	objs := Objects{
		Networks: []estuaryv1.Network{network("overlay", estuaryv1.NetworkTypeOverlay, 4),
			underlayNet("vlan", "", 100, r1), underlayNet("other", estuaryv1.NetworkModeVLAN, 0, map[string]string{"rack": "r2"}),
			bgpNet("fabric", 65010, r1, "10.77.0.1"), deleting},
		Subnets: []estuaryv1.Subnet{vlanB, vlanA, subnet("ov4", "overlay", "10.78.0.0/16", nil),
			subnet("other-a", "other", "192.168.20.0/24", nil), subnet("fabric-a", "fabric", "10.90.0.0/24", nil),
			subnet("bad", "vlan", "192.168.30.0/33", nil)},
	}
	pods := addrs("10.78.0.3", "10.90.0.9", "192.168.10.5", "192.168.10.6", "192.168.20.7")
	in, err := BuildUnderlayInput(&self, "eth0", objs, pods)
	if err == nil || !strings.Contains(err.Error(), "subnet bad") {
		t.Fatalf("error = %v; want one naming subnet bad", err)
	}
	if in.Uplink != "eth0" || len(in.Networks) != 2 || in.Networks[1].Name != "vlan" || in.Networks[1].VLAN != 100 ||
		in.Networks[1].Mode != underlay.ModeVLAN {
		t.Fatalf("networks = %+v; want fabric and vlan (in the domain, not being deleted)", in.Networks)
	}
	if f := in.Networks[0]; f.Name != "fabric" || f.Mode != underlay.ModeBGP || f.VLAN != 0 ||
		!slices.Equal(f.Peers, addrs("10.77.0.1")) || len(f.Subnets) != 1 ||
		!slices.Equal(f.Subnets[0].LocalPods, addrs("10.90.0.9")) {
		t.Fatalf("fabric = %+v; want BGP mode, its peer, fabric-a with its pod", f)
	}
	subs := in.Networks[1].Subnets
	if len(subs) != 2 || subs[0].Name != "vlan-a" || subs[1].Name != "vlan-b" {
		t.Fatalf("subnets = %+v; want vlan-a and vlan-b", subs)
	}
	a, b := subs[0], subs[1]
	if a.Gateway != netip.MustParseAddr("192.168.10.1") || a.VLAN != nil || a.NATOutgoing ||
		!slices.Equal(a.LocalPods, addrs("192.168.10.5", "192.168.10.6")) {
		t.Fatalf("vlan-a = %+v; want its gateway, the network's VLAN, no NAT and the two local pods inside it", a)
	}
	if b.VLAN == nil || *b.VLAN != 101 || !b.NATOutgoing || len(b.LocalPods) != 0 {
		t.Fatalf("vlan-b = %+v; want VLAN 101, NAT, no pods", b)
	}
	var names []string
	for _, r := range in.Cluster {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"fabric-a", "other-a", "vlan-a", "vlan-b"}) {
		t.Fatalf("cluster = %v; want every valid Underlay subnet of any mode and domain", names)
	}

	out := labelled(self, map[string]string{"rack": "r9"})
	in, _ = BuildUnderlayInput(&out, "eth0", objs, pods)
	if len(in.Networks) != 0 || len(in.Cluster) != 4 {
		t.Fatalf("outside every domain: networks %+v, cluster %d; want none and all 4", in.Networks, len(in.Cluster))
	}

	nets, err := BuildBGPNetworks(&self, objs, pods)
	if err != nil || len(nets) != 1 || nets[0].Name != "fabric" || nets[0].ASN != 65010 {
		t.Fatalf("bgp networks = %+v, %v; want fabric, AS 65010", nets, err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.90.0.0/24"), netip.MustParsePrefix("10.90.0.9/32")}
	if !slices.Equal(nets[0].Prefixes, want) {
		t.Fatalf("prefixes = %v, want %v", nets[0].Prefixes, want)
	}
}

// A deleted subnet stays in Input.Cluster until an Apply succeeded without
// its network, so the agent still owns (and removes) its neighbours and
// addresses.
func TestDeletedSubnetStaysListedUntilApplied(t *testing.T) {
	r1 := map[string]string{"rack": "r1"}
	self := labelled(node("node-1", "", "", "10.77.0.11"), r1)
	fu := &fakeUnderlay{}
	s := &Syncer{opts: withDefaults(Options{Node: "node-1", Underlay: fu, Log: logr.Discard()}), dp: &fakeDataplane{}}
	parent := func() (overlay.Parent, error) { return (&fakeDataplane{}).ResolveParent(overlay.ParentSpec{}) }
	objs := Objects{Networks: []estuaryv1.Network{underlayNet("vlan", "", 0, r1)},
		Subnets: []estuaryv1.Subnet{subnet("vlan-a", "vlan", "192.168.10.0/24", nil)}}
	pods := addrs("192.168.10.5")
	if err := syncUnderlayOf(s, &self, objs, pods, parent); err != nil {
		t.Fatal(err)
	}
	if in, _ := fu.last(); in.Uplink != "eth0" || len(in.NodeAddrs) != 1 || in.NodeAddrs[0].Dev != "eth0" {
		t.Fatalf("uplink %q, node addresses %v; want the tunnel parent eth0 and its address", in.Uplink, in.NodeAddrs)
	}
	gone := Objects{}
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

// syncUnderlayOf runs syncUnderlay as sync does, from the node's objects.
func syncUnderlayOf(s *Syncer, node *corev1.Node, objs Objects, pods []netip.Addr, parent func() (overlay.Parent, error)) error {
	in, err := underlayOf(node, objs, pods)
	return s.syncUnderlay(context.Background(), node, in, err, pods, parent)
}
