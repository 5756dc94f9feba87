package datapath

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
)

// testOptions set up a test's loop and its parts as the daemon does.
type testOptions struct {
	Node          string
	Port          int
	Parent        overlay.ParentSpec
	Resync        time.Duration
	Log           logr.Logger
	Metrics       *Metrics
	KubeProxyMark uint32
	// LocalPods, Underlay: nil runs no such part.
	LocalPods    LocalPods
	Underlay     Underlay
	StartSpeaker StartSpeaker
	Events       Events
}

// testLoop is a loop with the parts a test looks into.
type testLoop struct {
	*Syncer
	trigger *Trigger
	overlay *OverlayPart
	bgp     *BGPPart
}

// testParts builds the parts of o in the daemon's order, woken by t, and
// the loop's options.
func testParts(o testOptions, dp Dataplane, w client.Client, t *Trigger) (Options, *OverlayPart, *BGPPart) {
	ovl := NewOverlayPart(OverlayConfig{Node: o.Node, KubeProxyMark: o.KubeProxyMark, Log: o.Log}, dp)
	speakers := NewBGPPart(BGPConfig{Node: o.Node, Client: w, StartSpeaker: o.StartSpeaker, PasswordRefresh: o.Resync,
		Trigger: t, Events: o.Events, Log: o.Log})
	parts := []Part{NewVTEPPart(VTEPConfig{Node: o.Node, Port: o.Port, Writer: w, Log: o.Log}), ovl}
	if o.Underlay != nil {
		parts = append(parts, NewUnderlayPart(UnderlayConfig{Node: o.Node, Links: dp, Log: o.Log}, o.Underlay))
	}
	opts := Options{Node: o.Node, Resync: o.Resync, Log: o.Log, Metrics: o.Metrics,
		Parent: func() (overlay.Parent, error) { return dp.ResolveParent(o.Parent) }, Parts: append(parts, speakers)}
	if o.LocalPods != nil {
		opts.BeforeRead = []Part{NewLocalPodsPart(o.LocalPods, o.Log)}
	}
	return opts, ovl, speakers
}

// newTestLoop builds the loop of o over the cache c, as the daemon does.
func newTestLoop(ctx context.Context, t *testing.T, o testOptions, dp Dataplane, c *testCaches, w client.Client,
	eps Endpoints) *testLoop {
	t.Helper()
	trigger := NewTrigger()
	opts, ovl, speakers := testParts(o, dp, w, trigger)
	c.records = recordsCache(t, c.cfg, o.Node)
	s, err := New(ctx, opts, c.Cache, c.records, eps, trigger)
	if err != nil {
		t.Fatal(err)
	}
	return &testLoop{Syncer: s, trigger: trigger, overlay: ovl, bgp: speakers}
}
