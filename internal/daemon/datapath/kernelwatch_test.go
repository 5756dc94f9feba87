package datapath

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/remote"
	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/test/infra/nstest"
	"github.com/estuary-cni/estuary/test/infra/objtest"
)

func TestRelevant(t *testing.T) {
	for _, tc := range []struct {
		name    string
		parents []string
		want    bool
	}{
		{"estvx4", []string{"eth0"}, true},
		{"estvx16777215", nil, true},
		{"eth0.100", []string{"eth0"}, true},
		{"bond0.4094", []string{"eth0"}, true}, // an administrator's vlan-if estuary may use
		{"est1a2b3c.100", []string{"eth0"}, true},
		{"eth0", []string{"eth0"}, true},
		{"ens5", []string{"eth0", "ens5"}, true},
		{"eth1", []string{"eth0"}, false},
		{"est0123456789a", []string{"eth0"}, false}, // a pod's host veth
		{"est0123456789a", []string{""}, false},
		{"docker0", []string{""}, true}, // the parent is unknown: it may be any link
		{"docker0", nil, false},
		{"eth0.", []string{"x"}, false},
		{"eth0.12345", []string{"x"}, false},
		{"eth0.1a", []string{"x"}, false},
		{".5", []string{"x"}, false},
		{"", []string{""}, false},
	} {
		if got := Relevant(tc.name, tc.parents...); got != tc.want {
			t.Errorf("Relevant(%q, %q) = %v, want %v", tc.name, tc.parents, got, tc.want)
		}
	}
}

// countingDataplane counts the loop's overlay passes.
type countingDataplane struct {
	Dataplane
	applies atomic.Int32
}

func (c *countingDataplane) Apply(ctx context.Context, in overlay.Input) (desired.Plan, error) {
	c.applies.Add(1)
	return c.Dataplane.Apply(ctx, in)
}

// waitQuiet waits until n has not moved for a window, and returns it.
func waitQuiet(t *testing.T, n *atomic.Int32) int32 {
	t.Helper()
	const window = 600 * time.Millisecond // well above Quiet and MaxDelay
	deadline := time.Now().Add(20 * time.Second)
	last, since := n.Load(), time.Now()
	for time.Since(since) < window {
		if time.Now().After(deadline) {
			t.Fatalf("the loop does not go quiet: %d passes", n.Load())
		}
		time.Sleep(20 * time.Millisecond)
		if v := n.Load(); v != last {
			last, since = v, time.Now()
		}
	}
	return last
}

// With the real overlay agent in a namespace of its own and a resync far
// away, the kernel watch repairs a deleted tunnel device and follows the
// parent's MTU at once, and a pod's host veth coming and going costs no pass.
func TestWatchKernelRepairsTheTunnel(t *testing.T) {
	ns := nstest.New(t)
	nstest.IP(t, ns, "link", "set", "lo", "up")
	nstest.IP(t, ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p")
	nstest.IP(t, ns, "link", "set", "eth0", "up")
	nstest.IP(t, ns, "addr", "add", "10.77.0.11/24", "dev", "eth0")
	agent, err := overlay.NewAgent(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.Close)
	h, err := ops.Open(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)

	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), estuaryv1.AddToScheme(scheme)); err != nil {
		t.Fatal(err)
	}
	self, ovl := objtest.Node("node-1", "", "", "10.77.0.11"), objtest.Network("overlay", estuaryv1.NetworkTypeOverlay, 4)
	sn := objtest.Subnet("ov4", "overlay", "10.78.0.0/16", nil)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&self, &ovl, &sn).Build()
	dp := &countingDataplane{Dataplane: agent}
	trigger := NewTrigger()
	opts, _, _ := testParts(testOptions{Node: "node-1", Port: 8472, Parent: overlay.ParentSpec{Name: "eth0"}, Resync: time.Hour,
		Log: logr.Discard()}, dp, c, trigger)
	recordScheme := runtime.NewScheme()
	if err := remote.AddToScheme(recordScheme); err != nil {
		t.Fatal(err)
	}
	records := fake.NewClientBuilder().WithScheme(recordScheme).Build()
	s := &Syncer{opts: withDefaults(opts), reader: c, records: records, eps: &fakeEndpoints{}, trigger: trigger}
	watch := KernelWatch{Netns: ns, Parent: overlay.ParentSpec{Name: "eth0"}, Links: dp, Log: logr.Discard()}
	ctx, cancel := context.WithCancel(context.Background())
	ran, watched := make(chan error, 1), make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	go func() { watched <- watch.Run(ctx, trigger) }()
	t.Cleanup(func() {
		cancel()
		for _, ch := range []chan error{ran, watched} {
			select {
			case err := <-ch:
				if err != nil {
					t.Errorf("after cancel: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("the loop or the watch did not return after its context ended")
			}
		}
	})

	dev := overlay.DeviceName(4)
	mtu := func(want int) func() error {
		return func() error {
			la, err := h.Addrs().OfLink(dev)
			if err != nil {
				return err
			}
			if la.MTU != want {
				return fmt.Errorf("%s has MTU %d, want %d", dev, la.MTU, want)
			}
			return nil
		}
	}
	eventually(t, "the tunnel device is created", mtu(overlay.MTUFor(1500, false)))
	waitQuiet(t, &dp.applies)

	nstest.IP(t, ns, "link", "del", dev)
	start := time.Now()
	eventually(t, "the deleted tunnel device comes back", mtu(overlay.MTUFor(1500, false)))
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the tunnel device came back after %v", took)
	}

	nstest.IP(t, ns, "link", "set", "eth0", "mtu", "9000")
	eventually(t, "the tunnel follows its parent's MTU", mtu(overlay.MTUFor(9000, false)))

	n := waitQuiet(t, &dp.applies)
	nstest.IP(t, ns, "link", "add", "est0123456789a", "type", "veth", "peer", "name", "pod0")
	nstest.IP(t, ns, "link", "set", "est0123456789a", "up")
	nstest.IP(t, ns, "link", "del", "est0123456789a")
	if got := waitQuiet(t, &dp.applies); got != n {
		t.Errorf("a pod's host veth coming and going cost %d passes", got-n)
	}
}
