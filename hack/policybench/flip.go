package main

// flip times a label change's enforcement. A client pod's label (--label)
// is set to --off, and the program waits until no target admits the
// client; then, --flips times, it sets the label to --on or back to --off
// (alternately) and, for each target at once, opens TCP connections from
// the client's network namespace (--netns) every --every, each given
// --timeout to connect. A connection that connects is admitted; one that
// times out was dropped (policy drops without an answer); any other error
// (refused, unreachable) ends the run. A target has taken the change at the
// start of the first of --confirm consecutive attempts (in the order they
// started) that all show the new state; the sample is that moment less the
// moment just before the label's PATCH was sent. Attempts start --every
// apart, so a sample is at most --every late, plus the time a worker takes
// to pick the attempt up.
//
// Output, tab-separated: flip, want (admit|drop), target, ms, patch_ms (how
// long the PATCH call itself took).

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/estuary-cni/estuary/internal/nsrun"
)

type flipConfig struct {
	Namespace, Pod, NetNS, Label, On, Off string
	Targets                               targetList
	Flips, Confirm, Workers               int
	Every, Timeout, Deadline, Gap         time.Duration
}

func (c *flipConfig) register(fs *flag.FlagSet) {
	fs.StringVar(&c.Namespace, "namespace", "default", "the client pod's namespace")
	fs.StringVar(&c.Pod, "pod", "", "the client pod, whose label is flipped")
	fs.StringVar(&c.NetNS, "netns", "", "the client's network namespace (/proc/PID/ns/net of its sandbox)")
	fs.StringVar(&c.Label, "label", "role", "the label flipped")
	fs.StringVar(&c.On, "on", "client", "the label's value the targets admit")
	fs.StringVar(&c.Off, "off", "none", "the label's value the targets drop")
	fs.Var(&c.Targets, "target", "NAME=IP:PORT of a server (repeat)")
	fs.IntVar(&c.Flips, "flips", 20, "label changes")
	fs.IntVar(&c.Confirm, "confirm", 3, "consecutive attempts that must show the new state")
	fs.IntVar(&c.Workers, "workers", 160, "threads in the client's namespace opening connections")
	fs.DurationVar(&c.Every, "every", 10*time.Millisecond, "time between attempts, per target")
	fs.DurationVar(&c.Timeout, "timeout", 300*time.Millisecond, "an attempt not connected by then was dropped")
	fs.DurationVar(&c.Deadline, "deadline", time.Minute, "give up on a change not enforced by then")
	fs.DurationVar(&c.Gap, "gap", 500*time.Millisecond, "pause between a change enforced everywhere and the next")
}

type target struct{ Name, Addr string }

// targetList is a repeated NAME=IP:PORT flag.
type targetList []target

func (t *targetList) String() string {
	s := make([]string, len(*t))
	for i, x := range *t {
		s[i] = x.Name + "=" + x.Addr
	}
	return strings.Join(s, ",")
}

func (t *targetList) Set(v string) error {
	name, addr, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("target %q: want NAME=IP:PORT", v)
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("target %q: %w", v, err)
	}
	*t = append(*t, target{Name: name, Addr: addr})
	return nil
}

// outcome of one connection attempt.
type outcome int

const (
	admitted outcome = iota + 1
	dropped
)

func (o outcome) String() string {
	if o == admitted {
		return "admit"
	}
	return "drop"
}

type attempt struct {
	start time.Time
	res   outcome
	err   error
}

// pool runs jobs on threads that live in one network namespace, so the
// sockets they open are the client pod's.
type pool struct{ jobs chan func() }

func newPool(nsPath string, n int) (*pool, error) {
	p := &pool{jobs: make(chan func())}
	ready := make(chan error, n)
	for range n {
		go func() {
			err := nsrun.Do(nsPath, func() error {
				ready <- nil
				for job := range p.jobs {
					job()
				}
				return nil
			})
			if err != nil {
				ready <- err
			}
		}()
	}
	for range n {
		if err := <-ready; err != nil {
			close(p.jobs)
			return nil, err
		}
	}
	return p, nil
}

func (p *pool) close() { close(p.jobs) }

func flip(ctx context.Context, cs kubernetes.Interface, cfg flipConfig, out io.Writer) error {
	if cfg.Pod == "" || cfg.NetNS == "" || len(cfg.Targets) == 0 {
		return errors.New("--pod, --netns and at least one --target are required")
	}
	p, err := newPool(cfg.NetNS, cfg.Workers)
	if err != nil {
		return err
	}
	defer p.close()
	setLabel := func(v string) error {
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{cfg.Label: v}}})
		if err != nil {
			return fmt.Errorf("label %s=%s: %w", cfg.Label, v, err)
		}
		_, err = cs.CoreV1().Pods(cfg.Namespace).Patch(ctx, cfg.Pod, types.MergePatchType, patch, metav1.PatchOptions{})
		if err != nil {
			return fmt.Errorf("label pod %s/%s %s=%s: %w", cfg.Namespace, cfg.Pod, cfg.Label, v, err)
		}
		return nil
	}
	if err := setLabel(cfg.Off); err != nil {
		return err
	}
	if _, err := probeAll(ctx, p, cfg, dropped); err != nil {
		return fmt.Errorf("before the first change: %w", err)
	}
	if _, err := fmt.Fprintln(out, "flip\twant\ttarget\tms\tpatch_ms"); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	for i := 1; i <= cfg.Flips; i++ {
		value, want := cfg.Off, dropped
		if i%2 == 1 {
			value, want = cfg.On, admitted
		}
		t0 := time.Now()
		if err := setLabel(value); err != nil {
			return err
		}
		patched := time.Since(t0)
		starts, err := probeAll(ctx, p, cfg, want)
		if err != nil {
			return fmt.Errorf("change %d (%s=%s): %w", i, cfg.Label, value, err)
		}
		for j, t := range cfg.Targets {
			_, err := fmt.Fprintf(out, "%d\t%s\t%s\t%.1f\t%.1f\n", i, want, t.Name,
				ms(starts[j].Sub(t0)), ms(patched))
			if err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		select {
		case <-time.After(cfg.Gap):
		case <-ctx.Done():
			return fmt.Errorf("change %d: %w", i, ctx.Err())
		}
	}
	return setLabel(cfg.Off)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// probeAll probes every target at once; it returns, per target, when it
// took the state want.
func probeAll(ctx context.Context, p *pool, cfg flipConfig, want outcome) ([]time.Time, error) {
	starts := make([]time.Time, len(cfg.Targets))
	errs := make([]error, len(cfg.Targets))
	var wg sync.WaitGroup
	for j, t := range cfg.Targets {
		wg.Go(func() {
			starts[j], errs[j] = probe(ctx, p, t.Addr, want, cfg)
			if errs[j] != nil {
				errs[j] = fmt.Errorf("%s (%s): %w", t.Name, t.Addr, errs[j])
			}
		})
	}
	wg.Wait()
	return starts, errors.Join(errs...)
}

// probe opens connections to addr every cfg.Every until cfg.Confirm
// consecutive attempts show want, and returns the start of the first of
// them.
func probe(ctx context.Context, p *pool, addr string, want outcome, cfg flipConfig) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Deadline)
	defer cancel()
	var (
		mu       sync.Mutex
		done     []attempt
		inflight sync.WaitGroup
	)
	notify := make(chan struct{}, 1)
	launch := func() {
		inflight.Add(1)
		job := func() {
			defer inflight.Done()
			a := attempt{start: time.Now()}
			d := net.Dialer{Timeout: cfg.Timeout}
			c, err := d.DialContext(ctx, "tcp", addr)
			var ne net.Error
			switch {
			case err == nil:
				a.res = admitted
				_ = c.Close()
			case errors.As(err, &ne) && ne.Timeout() && ctx.Err() == nil:
				a.res = dropped
			default:
				a.err = err
			}
			mu.Lock()
			done = append(done, a)
			mu.Unlock()
			select {
			case notify <- struct{}{}:
			default:
			}
		}
		go func() {
			select {
			case p.jobs <- job:
			case <-ctx.Done():
				inflight.Done()
			}
		}()
	}
	snapshot := func() []attempt {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(done)
	}
	for {
		tick := time.NewTicker(cfg.Every)
		launch()
	wait:
		for {
			select {
			case <-tick.C:
				launch()
			case <-notify:
				as := snapshot()
				if err := failure(as); err != nil {
					tick.Stop()
					cancel()
					inflight.Wait()
					return time.Time{}, err
				}
				if _, ok := firstRun(as, want, cfg.Confirm); ok {
					break wait
				}
			case <-ctx.Done():
				tick.Stop()
				inflight.Wait()
				return time.Time{}, fmt.Errorf("no %d consecutive attempts showing %s within %s", cfg.Confirm, want, cfg.Deadline)
			}
		}
		tick.Stop()
		// Attempts still in flight may have started earlier: let them end,
		// then decide on all of them.
		inflight.Wait()
		as := snapshot()
		if err := failure(as); err != nil {
			return time.Time{}, err
		}
		if t, ok := firstRun(as, want, cfg.Confirm); ok {
			return t, nil
		}
	}
}

func failure(as []attempt) error {
	for _, a := range as {
		if a.err != nil {
			return fmt.Errorf("attempt at %s: %w", a.start.Format(time.StampMicro), a.err)
		}
	}
	return nil
}

// firstRun returns the start of the first of n consecutive attempts, in
// start order, that all show want.
func firstRun(as []attempt, want outcome, n int) (time.Time, bool) {
	as = slices.Clone(as)
	slices.SortFunc(as, func(a, b attempt) int { return a.start.Compare(b.start) })
	run := 0
	for i, a := range as {
		if a.res != want {
			run = 0
			continue
		}
		run++
		if run == n {
			return as[i-n+1].start, true
		}
	}
	return time.Time{}, false
}
