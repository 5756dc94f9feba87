package fastpath

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
)

// TC is what the fast path needs from the node's traffic control and links
// (ops.TC).
type TC interface {
	AttachIngress(link string, fd int, name string) error
	Ingress(link string) (ops.IngressProgram, bool, error)
	DetachIngress(link string) error
	LinkIndexes() (map[string]int, error)
}

// Desired is where the program runs and what its maps say.
type Desired struct {
	// Devices are the node's devices the program runs on besides the pods'
	// veths: the overlay's tunnel and the uplinks. Missing ones are skipped.
	Devices []string
	// Pods are the host sides of the node's pod veths. Missing ones (a pod
	// being torn down) are skipped.
	Pods []string
	// Subnets are every subnet of the cluster.
	Subnets []Subnet
	// Tunnel is the overlay's VXLAN device, which the program encapsulates
	// and decapsulates for; nil (or a device missing) leaves the tunnel to
	// the device alone.
	Tunnel *TunnelDevice
	// VTEPs are the other nodes' tunnel endpoints.
	VTEPs []VTEP
}

// Attacher keeps a Program's maps and attachments equal to a Desired.
type Attacher struct {
	prog   *Program
	id     uint32
	tc     TC
	verify time.Duration

	attached   map[string]int // device -> ifindex it was attached at by this Attacher
	lastVerify time.Time

	// raise moves the program's echoes to EchoesViaStack once it runs
	// everywhere; raised reports its error, if any, to the next Sync.
	raise  *time.Timer
	raised chan error
}

// NewAttacher returns an Attacher for p through tc. Attachments it made are
// remembered by device and ifindex; every verify period (0: every Sync) it
// reads the devices' filters instead, so a filter removed by hand comes
// back.
func NewAttacher(p *Program, tc TC, verify time.Duration) (*Attacher, error) {
	id, err := p.ID()
	if err != nil {
		return nil, err
	}
	return &Attacher{prog: p, id: id, tc: tc, verify: verify, attached: map[string]int{}, raised: make(chan error, 1)}, nil
}

// Sync fills the maps, then attaches the program to every desired device
// that lacks it. Maps come first, so a newly attached program never runs
// with empty ones.
func (a *Attacher) Sync(d Desired) error {
	idx, err := a.tc.LinkIndexes()
	if err != nil {
		return fmt.Errorf("fast path: %w", err)
	}
	var pods []int
	for _, name := range d.Pods {
		if i, ok := idx[name]; ok {
			pods = append(pods, i)
		}
	}
	var tun *Tunnel
	if t := d.Tunnel; t != nil && idx[t.Device] > 0 && idx[t.Parent] > 0 {
		tun = &Tunnel{TunnelDevice: *t, Ifindex: idx[t.Device], ParentIndex: idx[t.Parent]}
	}
	if err := errors.Join(a.prog.SetSubnets(d.Subnets), a.prog.SetPods(pods), a.prog.SetTunnel(tun, d.VTEPs)); err != nil {
		return err
	}
	verify := a.lastVerify.IsZero() || time.Since(a.lastVerify) >= a.verify
	if verify {
		a.lastVerify = time.Now()
	}
	want := map[string]bool{}
	var errs []error
	for _, name := range slices.Concat(d.Devices, d.Pods) {
		i, ok := idx[name]
		if !ok || want[name] {
			continue
		}
		want[name] = true
		if err := a.ensure(name, i, verify); err != nil {
			errs = append(errs, err)
		}
	}
	for name := range a.attached {
		if !want[name] {
			delete(a.attached, name)
		}
	}
	select {
	case err := <-a.raised:
		a.raise = nil // retried below
		errs = append(errs, err)
	default:
	}
	if len(errs) == 0 {
		a.raiseEchoes()
	}
	return errors.Join(errs...)
}

// raiseEchoes schedules the program's move to its echoes (EchoesViaStack
// for a node that enforces policy), once, after Sync attached it to every
// device it wants: every echo request from then on passes conntrack, and the
// settle time lets the replies of those that did not come back first.
func (a *Attacher) raiseEchoes() {
	if a.raise != nil {
		return
	}
	cur, err := a.prog.Echoes()
	if err != nil || cur == a.prog.wantEchoes {
		return
	}
	want := a.prog.wantEchoes
	a.raise = time.AfterFunc(a.prog.settle, func() {
		if err := a.prog.SetEchoes(want); err != nil {
			a.raised <- err
		}
	})
}

// ensure attaches the program to name (ifindex i) unless it is known to be
// there; with verify, known means read from the kernel.
func (a *Attacher) ensure(name string, i int, verify bool) error {
	if a.attached[name] == i && !verify {
		return nil
	}
	if verify {
		p, ok, err := a.tc.Ingress(name)
		if err != nil {
			return fmt.Errorf("fast path: %w", err)
		}
		if ok && p.ID == a.id {
			a.attached[name] = i
			return nil
		}
	}
	if err := a.tc.AttachIngress(name, a.prog.FD(), Name); err != nil {
		return fmt.Errorf("fast path: %w", err)
	}
	a.attached[name] = i
	return nil
}

// Remove takes estuary's fast-path filter off every device of the
// namespace, for a daemon started with the fast path off.
func Remove(tc TC) (int, error) {
	idx, err := tc.LinkIndexes()
	if err != nil {
		return 0, fmt.Errorf("fast path: %w", err)
	}
	var (
		n    int
		errs []error
	)
	for name := range idx {
		p, ok, err := tc.Ingress(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("fast path: %w", err))
			continue
		}
		if !ok || p.Name != Name {
			continue
		}
		if err := tc.DetachIngress(name); err != nil {
			errs = append(errs, fmt.Errorf("fast path: %w", err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
