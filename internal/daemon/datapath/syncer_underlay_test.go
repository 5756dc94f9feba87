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
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/bgp"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

// logLines collects the loop's log.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		l.lines = append(l.lines, prefix+" "+args)
		l.mu.Unlock()
	}, funcr.Options{})
}

func (l *logLines) find(parts ...string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.ContainsFunc(l.lines, func(line string) bool {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				return false
			}
		}
		return true
	})
}

func apiSubnet(name, net, cidr, gateway string) *estuaryv1.Subnet {
	sn := objtest.Subnet(name, net, cidr, nil)
	sn.Spec.Range.Version, sn.Spec.Range.Gateway = 4, estuaryv1.IPAddress(gateway)
	return &sn
}

func TestSyncerAppliesUnderlayAndRunsBGP(t *testing.T) {
	k8s, c, _ := startEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	dp, fu, fs, logs := &fakeDataplane{}, &fakeUnderlay{}, newFakeSpeakers(), &logLines{}
	eps := &fakeEndpoints{}
	eps.set(endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: "a", IfName: "eth0"}, IPs: []string{"192.168.10.5/32"}},
		endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: "b", IfName: "eth0"}, IPs: []string{"10.90.0.9/32"}},
		endpointstore.Endpoint{Key: endpointstore.Key{ContainerID: "c", IfName: "eth0"}, IPs: []string{"192.168.20.7/32"}})
	s := newTestLoop(ctx, t, testOptions{Node: "node-a", Port: 8472, Log: logs.logger(), Underlay: fu, StartSpeaker: fs.start},
		dp, c, k8s, eps)

	r1 := map[string]string{"rack": "r1"}
	a, b := objtest.Labelled(objtest.Node("node-a", "", "", "10.77.0.11"), r1), objtest.Labelled(objtest.Node("node-b", "", "", "10.77.0.12"), r1)
	vlan := objtest.UnderlayNet("vlan", estuaryv1.NetworkModeVLAN, 100, r1)
	other := objtest.UnderlayNet("other", estuaryv1.NetworkModeVLAN, 200, map[string]string{"rack": "r2"})
	fabric := objtest.UnderlayNet("fabric", estuaryv1.NetworkModeBGP, 65010, r1)
	fabric.Spec.BGPPeers = []estuaryv1.BGPPeer{{Address: "10.77.0.1", ASN: 65000}, {Address: "10.77.0.2", ASN: 65000,
		PasswordSecretRef: &estuaryv1.SecretKeyReference{Namespace: "default", Name: "bgp-pw", Key: "password"}}}
	create(t, k8s, &a, &b, &vlan, &other, &fabric,
		apiSubnet("vlan-a", "vlan", "192.168.10.0/24", "192.168.10.1"), apiSubnet("vlan-b", "vlan", "192.168.11.0/24", ""),
		apiSubnet("other-a", "other", "192.168.20.0/24", ""), apiSubnet("fabric-a", "fabric", "10.90.0.0/24", ""))
	// The node's address, which the API server does not take on create.
	a.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.77.0.11"}}
	if err := k8s.Status().Update(ctx, &a); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	eventually(t, "the underlay input holds vlan with its subnets and local pods, without an Overlay network", func() error {
		in, _ := fu.last()
		if in.Uplink != "eth0" || len(in.Networks) != 2 || in.Networks[1].Name != "vlan" || in.Networks[1].VLAN != 100 {
			return fmt.Errorf("input %+v", in)
		}
		if f := in.Networks[0]; f.Name != "fabric" || f.Mode != underlay.ModeBGP ||
			!slices.Equal(f.Peers, objtest.Addrs("10.77.0.1", "10.77.0.2")) {
			return fmt.Errorf("bgp network %+v", f)
		}
		if want := netip.MustParsePrefix("10.77.0.11/24"); len(in.NodeAddrs) != 1 || in.NodeAddrs[0].Prefix != want {
			return fmt.Errorf("node addresses %v, want %s: the uplink's prefix tells which peers are on it", in.NodeAddrs, want)
		}
		subs := in.Networks[1].Subnets
		if len(subs) != 2 || subs[0].Name != "vlan-a" || !slices.Equal(subs[0].LocalPods, objtest.Addrs("192.168.10.5")) ||
			subs[0].Gateway != netip.MustParseAddr("192.168.10.1") || subs[1].Name != "vlan-b" || len(subs[1].LocalPods) != 0 {
			return fmt.Errorf("subnets %+v", subs)
		}
		if len(in.Cluster) != 4 {
			return fmt.Errorf("cluster %+v, want the 4 underlay subnets", in.Cluster)
		}
		return nil
	})
	wantPrefixes := []netip.Prefix{netip.MustParsePrefix("10.90.0.0/24"), netip.MustParsePrefix("10.90.0.9/32")}
	eventually(t, "a restarting speaker for fabric with the peer without a password and the pod and subnet prefixes", func() error {
		sp, ok := fs.get(65010)
		if !ok {
			return fmt.Errorf("no speaker")
		}
		if sp.cfg.RouterID != netip.MustParseAddr("10.77.0.11") || sp.cfg.NextHopIPv4 != sp.cfg.RouterID || !sp.cfg.Restarting {
			return fmt.Errorf("config %+v", sp.cfg)
		}
		if len(sp.peers) != 1 || sp.peers[0].Address != netip.MustParseAddr("10.77.0.1") || sp.peers[0].ASN != 65000 {
			return fmt.Errorf("peers %+v", sp.peers)
		}
		if !slices.Equal(sp.prefixes, wantPrefixes) {
			return fmt.Errorf("prefixes %v", sp.prefixes)
		}
		return nil
	})
	eventually(t, "the missing password secret is reported, naming the secret and the peer", func() error {
		if !logs.find("password secret default/bgp-pw", "peer 10.77.0.2", "network fabric") {
			return fmt.Errorf("no such error logged")
		}
		return nil
	})

	create(t, k8s, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "bgp-pw"},
		Data: map[string][]byte{"password": []byte("s3cret")}})
	eventually(t, "the peer with its password once the secret exists", func() error {
		sp, _ := fs.get(65010)
		if len(sp.peers) != 2 || sp.peers[1].Address != netip.MustParseAddr("10.77.0.2") || sp.peers[1].Password != "s3cret" {
			return fmt.Errorf("peers %+v", sp.peers)
		}
		return nil
	})
	if st, err := s.bgp.BGPPeers(ctx); err != nil || len(st["fabric"]) != 2 {
		t.Fatalf("BGPPeers = %v, %v; want fabric's two peers", st, err)
	}

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"labels":{"rack":"r9"}}}`))
	if err := k8s.Patch(ctx, &a, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, "relabelled out of the domain: an empty underlay input and the speaker withdrawn and stopped", func() error {
		in, _ := fu.last()
		if len(in.Networks) != 0 || len(in.Cluster) != 4 {
			return fmt.Errorf("input %+v", in)
		}
		sp, _ := fs.get(65010)
		if !sp.stopped || len(sp.peers) != 0 || len(sp.prefixes) != 0 {
			return fmt.Errorf("speaker stopped %v, peers %v, prefixes %v", sp.stopped, sp.peers, sp.prefixes)
		}
		return nil
	})
	if st, _ := s.bgp.BGPPeers(ctx); len(st) != 0 {
		t.Fatalf("BGPPeers after the network left = %v, want none", st)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run after cancel = %v, want nil", err)
	}
}

// The daemon's stop stops the speakers without deconfiguring them.
func TestRunStopsSpeakersGracefully(t *testing.T) {
	fs := newFakeSpeakers()
	speakers := NewBGPPart(BGPConfig{StartSpeaker: fs.start, Log: logr.Discard()})
	s := &Syncer{opts: withDefaults(Options{Log: logr.Discard(), Parts: []Part{speakers}}), trigger: NewTrigger()}
	sp, _ := fs.start(context.Background(), bgp.Config{LocalASN: 65010}, []bgp.Peer{{ASN: 1}}, wantOne)
	speakers.speakers["fabric"] = speakerState{sp: sp}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := fs.get(65010)
	if !got.stopped || len(got.peers) != 1 || len(got.prefixes) != 1 {
		t.Fatalf("speaker stopped %v with peers %v and prefixes %v; want stopped with both kept", got.stopped, got.peers, got.prefixes)
	}
}

var wantOne = []netip.Prefix{netip.MustParsePrefix("10.90.0.9/32")}
