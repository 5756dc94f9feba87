package netsync

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/translate/objtest"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
)

// fakeARP records PodReady's calls; probeMAC answers probes, gwErr fails
// gateway checks.
type fakeARP struct {
	mu       sync.Mutex
	calls    []string
	probeMAC net.HardwareAddr
	gwErr    error
}

func (f *fakeARP) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeARP) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func (f *fakeARP) Probe(_ context.Context, in underlay.Input, ip netip.Addr, _ time.Duration) (net.HardwareAddr, error) {
	f.record("probe " + ip.String() + " on " + in.Uplink)
	return f.probeMAC, nil
}

func (f *fakeARP) CheckGateway(_ context.Context, _ underlay.Input, ip netip.Addr, _ time.Duration) (net.HardwareAddr, error) {
	f.record("gateway " + ip.String())
	return nil, f.gwErr
}

func (f *fakeARP) Announce(_ underlay.Input, ip netip.Addr) error {
	f.record("announce " + ip.String())
	return nil
}

// PodReady probes, checks the gateway and announces only the addresses of
// VLAN subnets of the node's domains, and fails on a duplicate or a silent
// gateway, before announcing.
func TestPodReadyChecksVLANAddressesOnly(t *testing.T) {
	k8s, c, _ := startEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	arp := &fakeARP{}
	s, err := New(ctx, Options{Node: "node-a", Port: 8472, Log: logr.Discard(), ARP: arp}, &fakeDataplane{}, c, k8s, &fakeEndpoints{})
	if err != nil {
		t.Fatal(err)
	}
	r1 := map[string]string{"rack": "r1"}
	a := objtest.Labelled(objtest.Node("node-a", "", "", "10.77.0.11"), r1)
	vlan := objtest.UnderlayNet("vlan", estuaryv1.NetworkModeVLAN, 0, r1)
	fabric := objtest.UnderlayNet("fabric", estuaryv1.NetworkModeBGP, 65010, r1)
	fabric.Spec.BGPPeers = []estuaryv1.BGPPeer{{Address: "10.77.0.1", ASN: 65000}}
	v6 := apiSubnet("vlan-v6", "vlan", "fd10::/64", "fd10::1")
	v6.Spec.Range.Version = 6
	create(t, k8s, &a, &vlan, &fabric, apiSubnet("vlan-a", "vlan", "192.168.10.0/24", "192.168.10.1"),
		apiSubnet("vlan-b", "vlan", "192.168.11.0/24", ""), apiSubnet("fabric-a", "fabric", "10.90.0.0/24", ""), v6)
	go func() { _ = c.Start(ctx) }()

	pod := objtest.Addrs("192.168.10.5", "10.90.0.9", "10.244.0.3")
	want := []string{"probe 192.168.10.5 on eth0", "gateway 192.168.10.5", "announce 192.168.10.5"}
	eventually(t, "a VLAN address probed, its gateway checked and announced; BGP and overlay addresses untouched", func() error {
		if err := s.PodReady(ctx, pod); err != nil {
			return err
		}
		if got := arp.take(); !slices.Equal(got, want) {
			return fmt.Errorf("calls %v, want %v", got, want)
		}
		return nil
	})
	ghost, err := New(ctx, Options{Node: "ghost", Port: 8472, Log: logr.Discard(), ARP: arp}, &fakeDataplane{}, c, k8s, &fakeEndpoints{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ghost.PodReady(ctx, objtest.Addrs("10.244.0.3", "10.90.0.9")); err != nil {
		t.Errorf("node missing from the cache, no VLAN address: PodReady = %v, want nil", err)
	}
	if err := ghost.PodReady(ctx, objtest.Addrs("192.168.10.6")); err == nil || !strings.Contains(err.Error(), "node ghost") {
		t.Errorf("node missing from the cache, a VLAN address: PodReady = %v, want an error naming node ghost", err)
	}
	if got := arp.take(); len(got) != 0 {
		t.Errorf("node missing from the cache: calls %v, want none", got)
	}
	if err := s.PodReady(ctx, objtest.Addrs("192.168.11.7")); err != nil {
		t.Fatal(err)
	}
	if got, want := arp.take(), []string{"probe 192.168.11.7 on eth0", "announce 192.168.11.7"}; !slices.Equal(got, want) {
		t.Errorf("subnet without a gateway: calls %v, want %v", got, want)
	}

	if err := s.PodReady(ctx, objtest.Addrs("fd10::7")); err != nil {
		t.Fatal(err)
	}
	if got, want := arp.take(), []string{"probe fd10::7 on eth0", "gateway fd10::7", "announce fd10::7"}; !slices.Equal(got, want) {
		t.Errorf("IPv6 subnet: calls %v, want %v", got, want)
	}

	arp.gwErr = errors.New("underlay gateway 192.168.10.1 of subnet vlan-a on eth0: no ARP answer")
	if err := s.PodReady(ctx, pod); err == nil || !strings.Contains(err.Error(), "192.168.10.1") {
		t.Errorf("silent gateway: PodReady = %v, want the gateway's error", err)
	}
	if got := arp.take(); slices.Contains(got, "announce 192.168.10.5") {
		t.Errorf("announced although the gateway did not answer: %v", got)
	}

	arp.probeMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x09}
	err = s.PodReady(ctx, pod)
	for _, part := range []string{"192.168.10.5", "vlan-a", "02:00:00:00:00:09", "in use"} {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("duplicate: PodReady = %v, want an error naming %q", err, part)
		}
	}
	if got := arp.take(); !slices.Equal(got, []string{"probe 192.168.10.5 on eth0"}) {
		t.Errorf("duplicate: calls %v, want the probe only", got)
	}
}
