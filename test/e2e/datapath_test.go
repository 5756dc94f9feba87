//go:build lab

package e2e_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The daemon's data-path fault (--fault-datapath-file, internal/faultinject):
// while the file holds "hang", every data-path pass hangs.
const (
	dataPathFaultFlag = "--fault-datapath-file"
	dataPathFaultFile = "/run/estuary/datapath-fault"
	staleNode         = "node-2"
	daemonRolloutTime = 6 * time.Minute
)

// TestDaemonUnreadyWhileItsDataPathIsStale: with node-2's data-path passes
// wedged (the fault file holds "hang"), its daemon keeps running (no
// restart: liveness leaves the loop out) but turns unready once no pass has
// succeeded within the 90 s bound, `kubectl estuary status` names the node
// with the reason, and a Warning DataPathStale is recorded on the Node; the
// other daemons stay ready. Unwedged, it is ready again, status is clean
// and DataPathRecovered is recorded. It logs how long each took.
func TestDaemonUnreadyWhileItsDataPathIsStale(t *testing.T) {
	e := needLab(t)
	plugin := e.plugin(t)
	var orig []string
	e.setDaemonArgs(t, func(args []string) []string {
		orig = withoutFlag(args, dataPathFaultFlag)
		return append(slices.Clone(orig), dataPathFaultFlag+"="+dataPathFaultFile)
	})
	t.Cleanup(func() {
		_, _ = e.run(context.Background(), staleNode, "rm", "-f", dataPathFaultFile)
		e.setDaemonArgs(t, func([]string) []string { return orig })
	})
	restarts, err := e.daemonRestarts(testCtx(t, time.Minute), staleNode)
	if err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	if _, err := e.exec(testCtx(t, time.Minute), staleNode, nil, "hang\n", "sh", "-c", "cat > "+dataPathFaultFile); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the daemon of "+staleNode+" unready, the others ready", 4*time.Minute, func(ctx context.Context) error {
		return e.daemonsReadyBut(ctx, staleNode)
	})
	unready := time.Since(start)
	r := e.waitStatusNames(t, plugin, staleNode+": ", "data path stale: no data-path pass has fully succeeded for", "has not returned")
	named := time.Since(start)
	t.Logf("kubectl estuary status with %s's data path wedged (exit %d):\n%s\n%v", staleNode, r.code, r.out, r.err)
	e.waitNodeEvent(t, staleNode, "DataPathStale", start)
	if n, err := e.daemonRestarts(testCtx(t, time.Minute), staleNode); err != nil || n != restarts {
		t.Errorf("daemon of %s restarts: %d (%v), want %d: the liveness probe must not judge the data path", staleNode, n, err, restarts)
	}

	fixed := time.Now()
	if _, err := e.run(testCtx(t, time.Minute), staleNode, "rm", "-f", dataPathFaultFile); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every daemon ready again", 3*time.Minute, func(ctx context.Context) error {
		return e.daemonsReadyBut(ctx, "")
	})
	ready := time.Since(fixed)
	if r := e.status(testCtx(t, 3*time.Minute), plugin, "--wait=2m"); r.code != 0 {
		t.Fatalf("status --wait=2m after the data path recovered: exit %d: %v\n%s", r.code, r.err, r.out)
	}
	e.waitNodeEvent(t, staleNode, "DataPathRecovered", fixed)
	t.Logf("wedged at 0s: daemon unready after %.0fs, named by status after %.0fs; unwedged: ready after %.0fs",
		unready.Seconds(), named.Seconds(), ready.Seconds())
}

// daemonsReadyBut is nil when every daemon is Ready except the one on
// node, which must be running and not Ready ("" : every daemon Ready).
func (e *labEnv) daemonsReadyBut(ctx context.Context, node string) error {
	pods, err := e.systemPods(ctx, daemonName, "")
	if err != nil {
		return err
	}
	if len(pods) != nodeCount {
		return fmt.Errorf("%d daemon pods, want %d", len(pods), nodeCount)
	}
	for i := range pods {
		p := &pods[i]
		switch ready := podReady(p); {
		case p.Spec.NodeName == node && ready:
			return fmt.Errorf("daemon %s on %s still ready", p.Name, node)
		case p.Spec.NodeName == node && p.Status.Phase != corev1.PodRunning:
			return fmt.Errorf("daemon %s on %s not running: %s", p.Name, node, describePod(p))
		case p.Spec.NodeName != node && !ready:
			return fmt.Errorf("daemon %s not ready: %s", p.Name, describePod(p))
		}
	}
	return nil
}

// setDaemonArgs replaces the daemon container's arguments with what change
// makes of them and waits until the DaemonSet has rolled out: every daemon
// pod runs with the new arguments and is Ready.
func (e *labEnv) setDaemonArgs(t *testing.T, change func([]string) []string) {
	t.Helper()
	var want []string
	err := waitFor("daemon DaemonSet updated", time.Minute, func(ctx context.Context) error {
		var ds appsv1.DaemonSet
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: daemonSet}, &ds); err != nil {
			return err
		}
		c := daemonContainer(&ds.Spec.Template.Spec)
		if c == nil {
			return fmt.Errorf("daemonset %s has no container %s", daemonSet, daemonCtr)
		}
		want = change(slices.Clone(c.Args))
		c.Args = slices.Clone(want)
		return e.c.Update(ctx, &ds)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = waitFor(fmt.Sprintf("daemons rolled out with args %v", want), daemonRolloutTime, func(ctx context.Context) error {
		pods, err := e.systemPods(ctx, daemonName, "")
		if err != nil {
			return err
		}
		if len(pods) != nodeCount {
			return fmt.Errorf("%d daemon pods, want %d", len(pods), nodeCount)
		}
		for i := range pods {
			p := &pods[i]
			if c := daemonContainer(&p.Spec); c == nil || !slices.Equal(c.Args, want) {
				return fmt.Errorf("daemon pod %s still runs with other arguments", p.Name)
			}
			if !podReady(p) {
				return fmt.Errorf("daemon pod %s: %s", p.Name, describePod(p))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func daemonContainer(s *corev1.PodSpec) *corev1.Container {
	for i := range s.Containers {
		if s.Containers[i].Name == daemonCtr {
			return &s.Containers[i]
		}
	}
	return nil
}
