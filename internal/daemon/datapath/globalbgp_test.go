package datapath

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// The loop hands the speaker of the node's BGP network the host route of
// the node's GlobalBGP pod (never the GlobalBGP subnet), starts it as a
// restarting speaker when only a GlobalBGP pod was plumbed before the
// daemon started, and gives the underlay the GlobalBGP subnet under that
// BGP network, with the peer that routes traffic only.
func TestSyncerAnnouncesGlobalBGPPods(t *testing.T) {
	k8s, c, _ := startEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dp, fu, fs, logs := &fakeDataplane{}, &fakeUnderlay{}, newFakeSpeakers(), &logLines{}
	eps := &fakeEndpoints{}
	eps.set(endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: "g", IfName: "eth0"}, IPs: []string{"10.84.0.7/32"}})
	s := newTestLoop(ctx, t, testOptions{Node: "node-g", Port: 8472, Log: logs.logger(), Underlay: fu, StartSpeaker: fs.start},
		dp, c, k8s, eps)
	r1 := map[string]string{"rack": "g1"}
	node := objtest.Labelled(objtest.Node("node-g", "", "", "10.77.0.21"), r1)
	fabric := objtest.UnderlayNet("fabric-g", estuaryv1.NetworkModeBGP, 65020, r1)
	fabric.Spec.BGPPeers = []estuaryv1.BGPPeer{{Address: "10.77.0.200", ASN: 65000, DoesNotRouteTraffic: true}, {Address: "10.77.0.1", ASN: 65000}}
	global := objtest.Network("global-g", estuaryv1.NetworkTypeGlobalBGP, 0)
	global.Spec.NetID = nil
	create(t, k8s, &node, &fabric, &global,
		apiSubnet("fabric-g-a", "fabric-g", "10.90.0.0/24", ""), apiSubnet("global-g-a", "global-g", "10.84.0.0/24", ""))
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.77.0.21"}}
	if err := k8s.Status().Update(ctx, &node); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	want := []netip.Prefix{netip.MustParsePrefix("10.84.0.7/32"), netip.MustParsePrefix("10.90.0.0/24")}
	eventually(t, "a restarting speaker for fabric-g announcing the GlobalBGP pod's /32 and fabric-g's subnet", func() error {
		sp, ok := fs.get(65020)
		if !ok {
			return fmt.Errorf("no speaker")
		}
		if !sp.cfg.Restarting {
			return fmt.Errorf("config %+v: want Restarting, a GlobalBGP pod was plumbed before the start", sp.cfg)
		}
		if len(sp.peers) != 2 {
			return fmt.Errorf("peers %+v: want both (doesNotRouteTraffic still peers)", sp.peers)
		}
		if !slices.Equal(sp.prefixes, want) {
			return fmt.Errorf("prefixes %v, want %v", sp.prefixes, want)
		}
		return nil
	})
	eventually(t, "the underlay input holds the GlobalBGP subnet under fabric-g, gateway peer 10.77.0.1 only", func() error {
		in, _ := fu.last()
		if len(in.Networks) != 1 {
			return fmt.Errorf("input %+v", in)
		}
		f := in.Networks[0]
		if !slices.Equal(f.Peers, objtest.Addrs("10.77.0.1")) || len(f.Subnets) != 2 || f.Subnets[1].Name != "global-g-a" ||
			!slices.Equal(f.Subnets[1].LocalPods, objtest.Addrs("10.84.0.7")) {
			return fmt.Errorf("fabric-g %+v", f)
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
}
