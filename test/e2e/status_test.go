//go:build lab

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/test/infra/lab"
	"github.com/estuary-cni/estuary/test/infra/lab/render"
)

// statusFaultNode is the node whose daemon TestStatusNamesFaults takes
// away; bgpStatusNode is the one whose BGP session it brings down.
const (
	statusFaultNode = "node-3"
	bgpStatusNode   = "node-1"
)

// statusResult is one run of `kubectl estuary status`.
type statusResult struct {
	out  string
	code int
	err  error
}

func (e *labEnv) status(ctx context.Context, plugin string, args ...string) statusResult {
	cmd := exec.CommandContext(ctx, plugin, append([]string{"status"}, args...)...)
	cmd.Env = append(cmd.Environ(), "KUBECONFIG="+e.kubeconfig)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := statusResult{out: stdout.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.code, r.err = exit.ExitCode(), fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	case err != nil:
		r.code, r.err = -1, err
	}
	return r
}

// waitStatusNames polls status until it exits 3 with an error naming
// every one of parts, and returns that run.
func (e *labEnv) waitStatusNames(t *testing.T, plugin string, parts ...string) statusResult {
	t.Helper()
	var r statusResult
	eventually(t, fmt.Sprintf("kubectl estuary status names %q", parts), 2*time.Minute, func(ctx context.Context) error {
		r = e.status(ctx, plugin)
		if r.code != 3 && r.err != nil {
			return fmt.Errorf("exit %d: %w", r.code, r.err)
		}
		if r.code != 3 {
			return fmt.Errorf("exit %d, nothing named", r.code)
		}
		for _, p := range parts {
			if !strings.Contains(r.err.Error(), p) {
				return fmt.Errorf("error does not name %q: %w", p, r.err)
			}
		}
		return nil
	})
	return r
}

// TestStatusNamesFaults: on the healthy lab `kubectl estuary status` exits
// 0 with a line for every node; with a BGP network it names the session
// the router disabled (and the daemon records BGPSessionDown, then
// BGPSessionUp) and is clean again once it is back (--wait); with the
// daemon kept off a node by the DaemonSet's affinity it names that node,
// and the DaemonSet restored brings the same pods back to where they were.
func TestStatusNamesFaults(t *testing.T) {
	e := needLab(t)
	plugin := e.plugin(t)
	start := time.Now()

	t.Run("healthy lab: exit 0, every node", func(t *testing.T) {
		r := e.status(testCtx(t, time.Minute), plugin, "--wait=2m")
		t.Logf("kubectl estuary status:\n%s", r.out)
		if r.code != 0 {
			t.Fatalf("status on the healthy lab: exit %d: %v\n%s", r.code, r.err, r.out)
		}
		for _, n := range e.nodes {
			if !statusLineOK(r.out, n) {
				t.Errorf("no OK line for node %s:\n%s", n, r.out)
			}
		}
	})

	t.Run("BGP peer down: named, recorded, clean again", func(t *testing.T) {
		e.checkStatusBGPDown(t, plugin, start)
	})

	t.Run("daemon kept off a node: named, then restored", func(t *testing.T) {
		e.checkStatusDaemonGone(t, plugin)
	})
}

// statusLineOK reports whether status printed an OK line for object.
func statusLineOK(out, object string) bool {
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 3 && f[0] == "OK" && f[2] == object {
			return true
		}
	}
	return false
}

// checkStatusBGPDown peers bgpStatusNode with the router, has the router
// disable the session, and enables it again.
func (e *labEnv) checkStatusBGPDown(t *testing.T, plugin string, since time.Time) {
	e.labelNodes(t, bgpLabel, bgpNetwork, bgpStatusNode)
	e.createBGP(t)
	e.waitBGPEstablished(t)
	if r := e.status(testCtx(t, 3*time.Minute), plugin, "--wait=2m"); r.code != 0 ||
		!strings.Contains(r.out, fmt.Sprintf("BGP %s peer %s Established", bgpNetwork, e.routerAddr)) {
		t.Fatalf("status with the BGP session up: exit %d (%v), want 0 and the session Established:\n%s", r.code, r.err, r.out)
	}
	proto := render.BirdProtocol(bgpStatusNode)
	t.Cleanup(func() { _ = e.birdc(context.Background(), "enable", proto) })
	if err := e.birdc(testCtx(t, time.Minute), "disable", proto); err != nil {
		t.Fatal(err)
	}
	peer := fmt.Sprintf("%s: ", bgpStatusNode)
	session := fmt.Sprintf("BGP network %s peer %s (AS %d)", bgpNetwork, e.routerAddr, lab.RouterASN)
	r := e.waitStatusNames(t, plugin, peer, session)
	t.Logf("kubectl estuary status with the router's session to %s disabled (exit %d):\n%s\n%v", bgpStatusNode, r.code, r.out, r.err)
	e.waitNodeEvent(t, bgpStatusNode, "BGPSessionDown", since)

	if err := e.birdc(testCtx(t, time.Minute), "enable", proto); err != nil {
		t.Fatal(err)
	}
	if r := e.status(testCtx(t, 3*time.Minute), plugin, "--wait=2m"); r.code != 0 {
		t.Fatalf("status --wait=2m after the session came back: exit %d: %v\n%s", r.code, r.err, r.out)
	}
	e.waitNodeEvent(t, bgpStatusNode, "BGPSessionUp", since)
	if kubectl, kubeconfig, err := e.kubectlPaths(); err == nil {
		out, err := exec.CommandContext(testCtx(t, time.Minute), kubectl, "--kubeconfig", kubeconfig,
			"events", "-n", "default", "--for", "node/"+bgpStatusNode).CombinedOutput()
		t.Logf("kubectl events -n default --for node/%s (%v):\n%s", bgpStatusNode, err, out)
	}
}

// birdc runs a command on the lab router's bird.
func (e *labEnv) birdc(ctx context.Context, args ...string) error {
	sock := lab.Paths{Root: e.state}.Router() + "/bird.ctl"
	out, err := exec.CommandContext(ctx, "birdc", append([]string{"-s", sock}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("birdc %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// waitNodeEvent waits for an Event of reason regarding node, recorded
// after since.
func (e *labEnv) waitNodeEvent(t *testing.T, node, reason string, since time.Time) {
	t.Helper()
	eventually(t, fmt.Sprintf("Event %s on node %s", reason, node), time.Minute, func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := e.c.List(ctx, &list, client.InNamespace("default")); err != nil {
			return err
		}
		var seen []string
		for _, ev := range list.Items {
			if ev.Regarding.Kind != "Node" || ev.Regarding.Name != node || ev.EventTime.Time.Before(since) {
				continue
			}
			if ev.Reason == reason {
				t.Logf("Event on node %s: %s %s: %s", node, ev.Type, ev.Reason, ev.Note)
				return nil
			}
			seen = append(seen, ev.Reason)
		}
		return fmt.Errorf("events since %s: %v", since.Format(time.RFC3339), seen)
	})
}

// checkStatusDaemonGone keeps the daemon off statusFaultNode with a
// required node affinity (the update strategy set to OnDelete first, so no
// other daemon is replaced), waits for status to name the node, and puts
// the DaemonSet back as it was: its template hash is then the one the
// other pods carry, so they stay, and the node gets its daemon again.
func (e *labEnv) checkStatusDaemonGone(t *testing.T, plugin string) {
	ctx := testCtx(t, time.Minute)
	key := client.ObjectKey{Namespace: systemNS, Name: daemonSet}
	var orig appsv1.DaemonSet
	if err := e.c.Get(ctx, key, &orig); err != nil {
		t.Fatal(err)
	}
	others := e.daemonPodUIDs(t, statusFaultNode)
	restore := func() error {
		return e.updateDaemonSet(context.Background(), func(ds *appsv1.DaemonSet) {
			ds.Spec.UpdateStrategy = orig.Spec.UpdateStrategy
			ds.Spec.Template.Spec.Affinity = orig.Spec.Template.Spec.Affinity
		})
	}
	t.Cleanup(func() { _ = restore() })
	if err := e.updateDaemonSet(ctx, func(ds *appsv1.DaemonSet) {
		ds.Spec.UpdateStrategy = appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}
		ds.Spec.Template.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpNotIn,
					Values: []string{statusFaultNode}}},
			}}},
		}}
	}); err != nil {
		t.Fatal(err)
	}
	r := e.waitStatusNames(t, plugin, statusFaultNode+": no estuary-daemon pod")
	t.Logf("kubectl estuary status with no daemon on %s (exit %d):\n%s\n%v", statusFaultNode, r.code, r.out, r.err)
	if r := e.status(testCtx(t, time.Minute), plugin, "-o", "json"); r.code != 3 || !strings.Contains(r.out, `"problems": 1`) {
		t.Errorf("status -o json with no daemon on %s: exit %d, want 3 and one problem:\n%s", statusFaultNode, r.code, r.out)
	} else {
		t.Logf("kubectl estuary status -o json:\n%s", r.out)
	}

	if err := restore(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the DaemonSet back: every daemon Ready and up to date", 3*time.Minute, func(ctx context.Context) error {
		var ds appsv1.DaemonSet
		if err := e.c.Get(ctx, key, &ds); err != nil {
			return err
		}
		s := ds.Status
		if s.ObservedGeneration < ds.Generation || s.DesiredNumberScheduled != int32(len(e.nodes)) ||
			s.NumberReady != s.DesiredNumberScheduled || s.UpdatedNumberScheduled != s.DesiredNumberScheduled {
			return fmt.Errorf("status %+v", s)
		}
		return nil
	})
	if now := e.daemonPodUIDs(t, statusFaultNode); !slices.Equal(now, others) {
		t.Errorf("the other nodes' daemon pods changed while the DaemonSet was restored: %v, then %v", others, now)
	}
	if r := e.status(testCtx(t, 3*time.Minute), plugin, "--wait=2m"); r.code != 0 {
		t.Fatalf("status --wait=2m after the DaemonSet was restored: exit %d: %v\n%s", r.code, r.err, r.out)
	}
}

// updateDaemonSet changes the daemon DaemonSet, retrying on conflicts.
func (e *labEnv) updateDaemonSet(ctx context.Context, change func(*appsv1.DaemonSet)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var ds appsv1.DaemonSet
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: daemonSet}, &ds); err != nil {
			return err
		}
		change(&ds)
		return e.c.Update(ctx, &ds)
	})
}

// daemonPodUIDs are the UIDs of the live daemon pods on every node but
// except, sorted.
func (e *labEnv) daemonPodUIDs(t *testing.T, except string) []types.UID {
	t.Helper()
	pods, err := e.systemPods(testCtx(t, time.Minute), daemonName, "")
	if err != nil {
		t.Fatal(err)
	}
	var out []types.UID
	for _, p := range pods {
		if p.Spec.NodeName != except && p.DeletionTimestamp == nil {
			out = append(out, p.UID)
		}
	}
	slices.Sort(out)
	return out
}
