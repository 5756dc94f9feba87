package daemon

// The node's links per mode.
//
// The VLAN networks' uplink, the BGP networks' uplink and the tunnel's
// parent are each chosen from an ordered list: the Node's annotation
// networking.estuary.io/uplink-<mode> when set, else the daemon's flags
// (the chart's lists, or its single uplink/parent value as a one-name
// list), else the mode's default link (the tunnel's parent for the
// underlay, the link of the default route or --vxlan-parent-regex for the
// tunnel). The first candidate that exists on the node is used, checked on
// every data-path pass, so a link that appears later, or an annotation
// changed on a running node, is picked up by the next pass. When none
// exists the mode's networks are not programmed, the daemon's status says
// so and a Warning Event names the candidates tried; no other link stands
// in. A malformed annotation is refused (status and Event name it) and
// changes nothing: the value accepted before it stays in use (the
// configured list after a restart).

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/datapath"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/uplink"
)

// Event reasons of the uplink choice.
const (
	ReasonUplinkNotFound = "UplinkNotFound"
	ReasonUplinkRefused  = "UplinkAnnotationRefused"
)

// linkFinder finds the node's links; overlay.Agent is one.
type linkFinder interface {
	LinkExists(name string) bool
	ResolveParent(spec overlay.ParentSpec) (overlay.Parent, error)
}

// uplinks chooses the node's link per mode; safe for concurrent use.
type uplinks struct {
	node       string
	configured map[uplink.Mode][]string
	fallback   overlay.ParentSpec // the tunnel's parent without a list
	links      linkFinder

	mu       sync.Mutex
	accepted map[string]string      // the Node's well-formed uplink annotations
	refused  map[uplink.Mode]string // why a mode's annotation was refused
}

// newUplinks returns the choice over cfg's lists, before any Node is seen.
func newUplinks(cfg Config, links linkFinder) *uplinks {
	one := func(name string) []string {
		if name == "" {
			return nil
		}
		return []string{name}
	}
	pick := func(list []string, name string) []string {
		if len(list) > 0 {
			return list
		}
		return one(name)
	}
	u := &uplinks{node: cfg.NodeName, links: links, fallback: overlay.ParentSpec{Regex: cfg.VXLANParentRegex},
		accepted: map[string]string{}, refused: map[uplink.Mode]string{},
		configured: map[uplink.Mode][]string{
			uplink.VLAN:  pick(cfg.VLANUplinks, cfg.UnderlayUplink),
			uplink.BGP:   pick(cfg.BGPUplinks, cfg.UnderlayUplink),
			uplink.VXLAN: pick(cfg.VXLANParents, cfg.VXLANParent),
		}}
	return u
}

// observe takes the uplink annotations of the daemon's Node. A malformed
// value is refused and changes nothing: the value accepted before it, if
// any, stays in use.
func (u *uplinks) observe(node *corev1.Node) {
	if node == nil {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, m := range uplink.Modes {
		key := uplink.Annotation(m)
		v, ok := node.Annotations[key]
		c := uplink.Resolve(m, u.node, map[string]string{key: v}, nil)
		switch {
		case !ok:
			delete(u.accepted, key)
			delete(u.refused, m)
		case c.Refused != "":
			u.refused[m] = c.Refused
		default:
			u.accepted[key] = v
			delete(u.refused, m)
		}
	}
}

// candidates are mode m's candidates now.
func (u *uplinks) candidates(m uplink.Mode) uplink.Candidates {
	u.mu.Lock()
	ann, refused := maps.Clone(u.accepted), u.refused[m]
	u.mu.Unlock()
	c := uplink.Resolve(m, u.node, ann, u.configured[m])
	c.Refused = refused
	return c
}

// choose returns mode m's link: "" with a nil error when m has no
// candidates (its default link applies), an error naming the candidates
// when none exists.
func (u *uplinks) choose(m uplink.Mode) (string, error) {
	c := u.candidates(m)
	if c.Source == uplink.FromDefault {
		return "", nil
	}
	exists := u.links.LinkExists
	if m == uplink.VXLAN {
		exists = func(name string) bool {
			_, err := u.links.ResolveParent(overlay.ParentSpec{Name: name})
			return err == nil
		}
	}
	if name, ok := uplink.Choose(c.Names, exists); ok {
		return name, nil
	}
	return "", noCandidate(u.node, c)
}

// noCandidate is the error of a mode none of whose candidates exists.
func noCandidate(node string, c uplink.Candidates) error {
	what := "link exists"
	if c.Mode == uplink.VXLAN {
		what = "link with a global address exists"
	}
	return fmt.Errorf("no %s candidate %s on node %s: tried %s (from the %s); its networks are not programmed",
		c.Mode, what, node, strings.Join(c.Names, ", "), c.Source)
}

// parent resolves the tunnel's parent link.
func (u *uplinks) parent() (overlay.Parent, error) {
	name, err := u.choose(uplink.VXLAN)
	if err != nil {
		return overlay.Parent{}, err
	}
	if name == "" {
		return u.links.ResolveParent(u.fallback)
	}
	return u.links.ResolveParent(overlay.ParentSpec{Name: name})
}

// tunnelParent resolves the tunnel's parent by the node's preference
// (uplinks.parent) for the kernel link watch, whatever spec it is asked.
type tunnelParent struct{ u *uplinks }

// ResolveParent implements datapath.ParentResolver.
func (t tunnelParent) ResolveParent(overlay.ParentSpec) (overlay.Parent, error) { return t.u.parent() }

// underlayLinks are the underlay's uplinks chosen now (VLAN, BGP), without
// the modes that use the tunnel's parent or have none.
func (u *uplinks) underlayLinks() []string {
	var out []string
	for _, m := range []uplink.Mode{uplink.VLAN, uplink.BGP} {
		if name, err := u.choose(m); err == nil && name != "" && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// watched are the links whose coming and going changes the underlay's
// choice: every VLAN and BGP candidate.
func (u *uplinks) watched() []string {
	var out []string
	for _, m := range []uplink.Mode{uplink.VLAN, uplink.BGP} {
		for _, n := range u.candidates(m).Names {
			if !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}

// status is the choice per mode, for the daemon's status.
func (u *uplinks) status() []estuaryv1.NodeUplinkStatus {
	var out []estuaryv1.NodeUplinkStatus
	for _, m := range uplink.Modes {
		c := u.candidates(m)
		st := estuaryv1.NodeUplinkStatus{Mode: string(m), Candidates: c.Names, Source: string(c.Source)}
		name, err := u.choose(m)
		switch {
		case err != nil:
			st.Problem = err.Error()
		case name == "":
			if p, err := u.parent(); err == nil {
				st.Link = p.Link
			}
		default:
			st.Link = name
		}
		if c.Refused != "" {
			st.Problem = strings.TrimPrefix(strings.Join([]string{st.Problem, c.Refused}, "; "), "; ")
		}
		out = append(out, st)
	}
	return out
}

// uplinkTransitions records a Warning Event when a mode's problem appears
// or changes.
func uplinkTransitions(events recorder, prev *estuaryv1.NodeDaemonStatus, st estuaryv1.NodeDaemonStatus) {
	was := map[string]string{}
	if prev != nil {
		for _, p := range prev.Uplinks {
			was[p.Mode] = p.Problem
		}
	}
	for _, s := range st.Uplinks {
		if s.Problem == "" || s.Problem == was[s.Mode] {
			continue
		}
		reason := ReasonUplinkNotFound
		if s.Link != "" {
			reason = ReasonUplinkRefused
		}
		events.Record(corev1.EventTypeWarning, reason, "ChooseUplink", s.Problem)
	}
}

// uplinksPart is the data-path loop's first part: it hands the Node's
// uplink annotations to the choice, so the pass's later parts use them.
type uplinksPart struct{ u *uplinks }

var _ datapath.Part = uplinksPart{}

// Name implements datapath.Part.
func (uplinksPart) Name() string { return datapath.PartOther }

// Sync implements datapath.Part.
func (p uplinksPart) Sync(_ context.Context, snap *datapath.Snapshot) error {
	p.u.observe(snap.Self)
	return nil
}
