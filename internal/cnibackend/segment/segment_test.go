package segment

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/estuary-cni/estuary/internal/cnibackend/ipwait"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/pkg/family"
)

// fakeARP records the checks' calls with the device each would use;
// probeMAC answers probes, gwErr fails gateway checks.
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

// dev is the vlan-if the real agent would use for in's one network.
func dev(in underlay.Input) string { return underlay.VLANName(in.Uplink, in.Networks[0].VLAN) }

func (f *fakeARP) Probe(_ context.Context, in underlay.Input, ip netip.Addr, _ time.Duration) (net.HardwareAddr, error) {
	f.record("probe " + ip.String() + " on " + dev(in))
	return f.probeMAC, nil
}

func (f *fakeARP) CheckGateway(_ context.Context, in underlay.Input, ip netip.Addr, _ time.Duration) (net.HardwareAddr, error) {
	f.record("gateway " + in.Networks[0].Subnets[0].Gateway.String() + " for " + ip.String())
	return nil, f.gwErr
}

func (f *fakeARP) Announce(_ underlay.Input, ip netip.Addr) error {
	f.record("announce " + ip.String())
	return nil
}

// segAddr is an address of subnet in network; seg non-nil puts it on a
// VLAN segment of this node.
func segAddr(ip, gw, network, subnet string, seg *ipwait.Segment) ipwait.Address {
	p := netip.MustParsePrefix(ip)
	a := ipwait.Address{IP: p, Family: family.Of(p.Addr()), Network: network, Subnet: subnet, Underlay: seg != nil, Segment: seg}
	if gw != "" {
		a.Gateway = netip.MustParseAddr(gw)
	}
	return a
}

// Checks probes, checks the gateway and announces only the addresses
// on a segment, on that segment's vlan-if, and fails on a duplicate or a
// silent gateway, before announcing.
func TestChecksProbeOnlySegmentAddresses(t *testing.T) {
	arp := &fakeARP{}
	uplinks := 0
	c := &Checks{ARP: arp, Uplink: func() (string, error) { uplinks++; return "eth0", nil }}
	ctx := context.Background()
	untagged := &ipwait.Segment{}
	pod := []ipwait.Address{
		segAddr("192.168.10.5/24", "192.168.10.1", "vlan", "vlan-a", untagged),
		segAddr("10.90.0.9/24", "", "fabric", "fabric-a", nil),
		segAddr("10.244.0.3/16", "", "overlay", "overlay-v4", nil),
	}
	if err := c.PodReady(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if got, want := arp.take(), []string{"probe 192.168.10.5 on eth0", "gateway 192.168.10.1 for 192.168.10.5", "announce 192.168.10.5"}; !slices.Equal(got, want) {
		t.Errorf("a VLAN address: calls %v, want %v", got, want)
	}
	if err := c.PodReady(ctx, pod[1:]); err != nil || uplinks != 1 || len(arp.take()) != 0 {
		t.Errorf("BGP and overlay addresses: PodReady = %v, uplink resolved %d times (want once in all), calls made", err, uplinks)
	}

	if err := c.PodReady(ctx, []ipwait.Address{segAddr("192.168.11.7/24", "", "vlan", "vlan-b", &ipwait.Segment{VLAN: 11})}); err != nil {
		t.Fatal(err)
	}
	if got, want := arp.take(), []string{"probe 192.168.11.7 on " + underlay.VLANName("eth0", 11), "announce 192.168.11.7"}; !slices.Equal(got, want) {
		t.Errorf("tagged subnet without a gateway: calls %v, want %v", got, want)
	}

	if err := c.PodReady(ctx, []ipwait.Address{segAddr("fd10::7/64", "fd10::1", "vlan", "vlan-v6", untagged)}); err != nil {
		t.Fatal(err)
	}
	if got, want := arp.take(), []string{"probe fd10::7 on eth0", "gateway fd10::1 for fd10::7", "announce fd10::7"}; !slices.Equal(got, want) {
		t.Errorf("IPv6 subnet: calls %v, want %v", got, want)
	}

	arp.gwErr = errors.New("underlay gateway 192.168.10.1 of subnet vlan-a on eth0: no ARP answer")
	if err := c.PodReady(ctx, pod); err == nil || !strings.Contains(err.Error(), "192.168.10.1") {
		t.Errorf("silent gateway: PodReady = %v, want the gateway's error", err)
	}
	if got := arp.take(); slices.Contains(got, "announce 192.168.10.5") {
		t.Errorf("announced although the gateway did not answer: %v", got)
	}

	arp.probeMAC = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x09}
	err := c.PodReady(ctx, pod)
	for _, part := range []string{"192.168.10.5", "vlan-a", "02:00:00:00:00:09", "in use"} {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("duplicate: PodReady = %v, want an error naming %q", err, part)
		}
	}
	if got := arp.take(); !slices.Equal(got, []string{"probe 192.168.10.5 on eth0"}) {
		t.Errorf("duplicate: calls %v, want the probe only", got)
	}

	broken := &Checks{ARP: arp, Uplink: func() (string, error) { return "", errors.New("no tunnel parent") }}
	if err := broken.PodReady(ctx, pod); err == nil || !strings.Contains(err.Error(), "no tunnel parent") {
		t.Errorf("uplink unknown: PodReady = %v, want its error", err)
	}
}
