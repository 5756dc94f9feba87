package datapath

import (
	"context"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/resubscribe"
)

// Backoff bounds of the kernel watch's resubscription.
const (
	kernelWatchRetryFirst = 100 * time.Millisecond
	kernelWatchRetryLimit = 30 * time.Second
)

// Relevant reports whether a change of the link name concerns the data
// path: a VXLAN device (estvx*), a vlan-if (a name ending in .<VLAN id>,
// `<uplink>.<id>` or `est<hex>.<id>`), or one of parents, the links the
// tunnel and the underlay use. An empty parent stands for one that could
// not be resolved: then any link may be it but a pod's host veth. Host veths
// (est* otherwise) never are: pods are the CNI path's, and their churn must
// not cost loop passes.
func Relevant(name string, parents ...string) bool {
	if name == "" {
		return false
	}
	if ownLink(name) {
		return true
	}
	for _, p := range parents {
		if name == p || (p == "" && !strings.HasPrefix(name, podnet.HostVethPrefix)) {
			return true
		}
	}
	return false
}

// ownLink reports whether name is a link the data path itself creates: a
// VXLAN device or a vlan-if.
func ownLink(name string) bool {
	if strings.HasPrefix(name, overlay.DevicePrefix) {
		return true
	}
	i := strings.LastIndexByte(name, '.')
	if i <= 0 || len(name)-i-1 < 1 || len(name)-i-1 > 4 {
		return false
	}
	for _, c := range name[i+1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// KernelWatch pokes the loop's Trigger when a link of the node's namespace
// that the data path depends on changes (Relevant).
type KernelWatch struct {
	// Netns is the node's network namespace; empty means the process's own.
	Netns string
	// Uplink is the underlay's NIC, if one is configured.
	Uplink string
	// Uplinks, when set, are the underlay's candidate NICs now, in place
	// of Uplink: any of them appearing or going changes the choice.
	Uplinks func() []string
	// Parent is the tunnel's parent as configured; Links resolves it.
	Parent overlay.ParentSpec
	Links  ParentResolver
	Log    logr.Logger
}

// Run pokes t whenever a link of Netns that the data path depends on
// changes (Relevant): a VXLAN device or vlan-if added, changed or deleted,
// the tunnel parent or the underlay's uplink going down or up or changing
// addresses. Changes of other links, pods' host veths above all, are
// ignored. Every subscription, the first and each renewed one, also pokes
// once, since changes may have come before it. A subscription that fails or
// ends is logged and opened again with a capped backoff. Run returns nil
// when ctx ends.
func (k KernelWatch) Run(ctx context.Context, t *Trigger) error {
	var parents []string
	ready := func() {
		parents = k.watchedParents()
		t.Poke()
	}
	onChange := func(name string) {
		if !Relevant(name, parents...) {
			return
		}
		t.Poke()
		if !ownLink(name) { // the parent may resolve otherwise now
			parents = k.watchedParents()
		}
	}
	resubscribe.Run(ctx, kernelWatchRetryFirst, kernelWatchRetryLimit, func(ctx context.Context) error {
		return ops.WatchLinks(ctx, k.Netns, ready, onChange)
	}, func(err error, wait time.Duration) {
		k.Log.Error(err, "kernel link watch stopped; subscribing again", "netns", k.Netns, "in", wait)
		t.Poke() // changes may have been lost
	})
	return nil
}

// watchedParents returns the links the data path uses beyond its own: the
// underlay's configured uplink and the tunnel's parent as it resolves now,
// else its configured name, else "" (unknown).
func (k KernelWatch) watchedParents() []string {
	var names []string
	if k.Uplinks != nil {
		names = append(names, k.Uplinks()...)
	} else if k.Uplink != "" {
		names = append(names, k.Uplink)
	}
	if p, err := k.Links.ResolveParent(k.Parent); err == nil {
		return append(names, p.Link)
	}
	return append(names, k.Parent.Name)
}
