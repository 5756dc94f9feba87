package datapath

// Admission. A new pod must be isolated before it starts when a policy
// selects it, so the CNI server's ADD does not reply while the pod's
// interface falls through the policy table's verdict maps (no entry
// accepts). Admit, called after the endpoint is stored and before the
// reply, runs a pass of this part that includes the new endpoint and waits
// for it, at most Config.AdmitWait: after it, the pod's verdicts are in
// the kernel (its chains; nothing, for a pod no policy selects; or
// PendingChain, for a pod not cached yet while a policy exists). When the
// pass fails or does not end in time (the cache not synced, a loop pass
// holding the table, a large cluster), Admit holds the endpoint pending
// itself (policy.HoldOps: an entry in each map that has none, sending the
// veth to PendingChain, which drops) and the ADD replies; the pass, which
// goes on, or a later one replaces the entries by the pod's own. Only when
// not even that write succeeds does the ADD fail (fail closed), and the
// runtime retries it.
//
// Design decisions:
//   - One pass at a time: the loop's passes and admissions' passes take
//     gate.run, and every pass lists the endpoint store afresh under it, so
//     a pass that starts after an ADD stored its endpoint includes it. An
//     admission joins a pass that is waiting to start rather than queueing
//     its own, so a burst of ADDs costs one or two passes, not one each.
//   - A pass that listed the endpoints before an ADD stored its endpoint
//     must not remove what the admission wrote: every admitted veth is held
//     (gate.held) until a pass that listed after it was admitted has
//     written the table, and a pass holds pending every held veth it did
//     not list. Writes of the table (a pass's Ensure, an admission's hold)
//     take gate.mu, so one never reads the table in the middle of another.
//   - The hold is a few map entries, never a recomputation, so it is
//     bounded by the kernel alone; it keeps any entry a pass wrote.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/internal/endpointstore"
)

// DefaultAdmitWait is PolicyConfig.AdmitWait's default.
const DefaultAdmitWait = time.Second

// admitPassTimeout bounds an admission's pass, which goes on after Admit
// returned.
const admitPassTimeout = time.Minute

// Outcomes of Admit.
const (
	// AdmitComputed: a pass that includes the endpoint has written the
	// table.
	AdmitComputed = "computed"
	// AdmitPending: the endpoint is held pending until a pass computes it.
	AdmitPending = "pending"
)

// gate serialises the part's passes and its table writes, and tracks the
// admitted veths no pass has covered yet.
type gate struct {
	run sync.Mutex // one pass at a time

	mu   sync.Mutex // the table's writes; the fields below
	held map[string]chan struct{}
	next *admitPass // a pass that has not listed the endpoints yet
}

// admitPass is a pass run for admissions; done closes when it ends, with
// err its result.
type admitPass struct {
	done chan struct{}
	err  error
}

// Admit returns once the endpoint ep's verdicts are in the kernel: its
// pass's, or pending. The outcome says which.
func (p *PolicyPart) Admit(ctx context.Context, ep endpointstore.Endpoint) (string, error) {
	if ep.PodName == "" {
		return AdmitComputed, nil // no pod: policy does not apply to it
	}
	if p.eps == nil {
		return "", errors.New("policy admission: no endpoint store (AdmitFrom)")
	}
	veth := p.cfg.HostVeth(ep.Key)
	covered, pass := p.admit(veth)
	timer := time.NewTimer(p.cfg.AdmitWait)
	defer timer.Stop()
	var why error
	select {
	case <-covered:
		return AdmitComputed, nil
	case <-pass.done:
		select {
		case <-covered:
			return AdmitComputed, nil
		default:
		}
		why = pass.err
	case <-timer.C:
		why = fmt.Errorf("no pass within %v", p.cfg.AdmitWait)
	case <-ctx.Done():
		why = ctx.Err()
	}
	held, err := p.hold(veth)
	if err != nil {
		return "", fmt.Errorf("policy admission of %s (%s/%s): %w", veth, ep.PodNamespace, ep.PodName,
			errors.Join(why, err))
	}
	if !held {
		return AdmitComputed, nil
	}
	p.cfg.Log.Info("new endpoint held pending until a pass computes its policy", "veth", veth,
		"pod", ep.PodNamespace+"/"+ep.PodName, "reason", why.Error())
	return AdmitPending, ctx.Err()
}

// AdmitFrom makes eps, the endpoint store the CNI server writes before it
// calls Admit, the endpoints of every pass: each lists them afresh instead
// of taking its snapshot's, so a pass that starts after an ADD stored its
// endpoint includes it. Call it before the loop runs and before Admit.
func (p *PolicyPart) AdmitFrom(eps Endpoints) { p.eps = eps }

// admit holds veth and returns the channel that closes when a pass covers
// it, and the admission pass that will.
func (p *PolicyPart) admit(veth string) (<-chan struct{}, *admitPass) {
	g := &p.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	ch, ok := g.held[veth]
	if !ok {
		ch = make(chan struct{})
		g.held[veth] = ch
	}
	if g.next == nil {
		g.next = &admitPass{done: make(chan struct{})}
		go p.runAdmitPass(g.next)
	}
	return ch, g.next
}

// runAdmitPass runs one pass for the admissions that joined a.
func (p *PolicyPart) runAdmitPass(a *admitPass) {
	defer close(a.done)
	ctx, cancel := context.WithTimeout(context.Background(), admitPassTimeout)
	defer cancel()
	nodes, err := Stored[corev1.Node](ctx, p.cfg.Reader, &corev1.NodeList{})
	if err != nil {
		a.err = fmt.Errorf("read the cache for policy: %w", err)
		return
	}
	a.err = p.sync(ctx, nodes, nil, a)
}

// sync is one pass: it lists the endpoints (the store's, or eps without
// one), computes their ruleset and writes it. a is the admission pass it
// runs for, if any: from the moment it lists, admissions start another.
func (p *PolicyPart) sync(ctx context.Context, nodes []*corev1.Node, eps []endpointstore.Endpoint, a ...*admitPass) error {
	g := &p.gate
	g.run.Lock()
	defer g.run.Unlock()
	g.mu.Lock()
	if len(a) > 0 && g.next == a[0] {
		g.next = nil
	}
	listed := make(map[string]chan struct{}, len(g.held))
	for v, ch := range g.held {
		listed[v] = ch
	}
	g.mu.Unlock()
	if p.eps != nil {
		var err error
		if eps, err = p.eps.List(); err != nil {
			return fmt.Errorf("list local endpoints for policy: %w", err)
		}
	}
	rs, err := p.compute(ctx, nodes, eps)
	if err != nil {
		return err
	}
	return p.write(rs, listed)
}

// write makes the table hold rs, with every held veth the pass did not
// list pending, and releases the veths it listed.
func (p *PolicyPart) write(rs policy.Ruleset, listed map[string]chan struct{}) error {
	g := &p.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	var unlisted []string
	for v := range g.held {
		if _, ok := listed[v]; !ok {
			unlisted = append(unlisted, v)
		}
	}
	if err := rs.Hold(unlisted...); err != nil {
		return fmt.Errorf("compile policy: %w", err)
	}
	ops, err := p.table.Ensure(rs)
	if err != nil {
		return fmt.Errorf("policy table: %w", err)
	}
	for v, ch := range listed {
		delete(g.held, v)
		close(ch)
	}
	if !ops.Empty() {
		p.cfg.Log.Info("policy table changed", "entries", len(rs.Ingress)+len(rs.Egress), "chains", len(rs.Chains),
			"sets", len(rs.Sets), "changes", ops.String())
	}
	return nil
}

// hold writes veth pending unless a pass covered it meanwhile; it says
// whether it did.
func (p *PolicyPart) hold(veth string) (bool, error) {
	g := &p.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.held[veth]; !ok {
		return false, nil
	}
	have, err := p.table.Read()
	if err != nil {
		return false, err
	}
	o, err := policy.HoldOps(have, policy.Skeleton{PodToNode: p.cfg.PodToNode}, []string{veth})
	if err != nil {
		return false, err
	}
	if o.Empty() {
		return true, nil
	}
	if err := p.table.Apply(o); err != nil {
		return false, err
	}
	return true, nil
}
