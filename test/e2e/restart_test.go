//go:build lab

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// systemPods lists the pods of an estuary component (by its name label),
// on node when node is not empty.
func (e *labEnv) systemPods(ctx context.Context, component, node string) ([]corev1.Pod, error) {
	opts := []client.ListOption{client.InNamespace(systemNS), client.MatchingLabels{nameLabel: component}}
	if node != "" {
		opts = append(opts, client.MatchingFields{"spec.nodeName": node})
	}
	var l corev1.PodList
	if err := e.c.List(ctx, &l, opts...); err != nil {
		return nil, fmt.Errorf("list %s pods: %w", component, err)
	}
	return l.Items, nil
}

// onlyPod is the single live pod of a component on node ("" for any node).
func (e *labEnv) onlyPod(ctx context.Context, component, node string) (*corev1.Pod, error) {
	pods, err := e.systemPods(ctx, component, node)
	if err != nil {
		return nil, err
	}
	var live []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	if len(live) != 1 {
		return nil, fmt.Errorf("%d live %s pods on %q, want 1", len(live), component, node)
	}
	return &live[0], nil
}

// replacePods deletes every live pod of a component (on node, or anywhere
// when node is empty) and waits until all of them are gone and as many
// other pods are Ready in their place.
func (e *labEnv) replacePods(t *testing.T, component, node string, opts ...client.DeleteOption) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	pods, err := e.systemPods(ctx, component, node)
	if err != nil {
		t.Fatal(err)
	}
	old := map[types.UID]string{}
	for i := range pods {
		if pods[i].DeletionTimestamp != nil {
			continue
		}
		old[pods[i].UID] = pods[i].Name
		if err := e.c.Delete(ctx, &pods[i], opts...); err != nil {
			t.Fatalf("delete %s pod %s: %v", component, pods[i].Name, err)
		}
	}
	if len(old) == 0 {
		t.Fatalf("no live %s pod on %q to replace", component, node)
	}
	eventually(t, fmt.Sprintf("%d %s pods on %q replaced by Ready pods", len(old), component, node), 4*time.Minute, func(ctx context.Context) error {
		pods, err := e.systemPods(ctx, component, node)
		if err != nil {
			return err
		}
		ready := 0
		for i := range pods {
			if name, ok := old[pods[i].UID]; ok {
				return fmt.Errorf("old pod %s still exists", name)
			}
			if podReady(&pods[i]) {
				ready++
			}
		}
		if ready < len(old) {
			return fmt.Errorf("%d of %d replacements Ready", ready, len(old))
		}
		return nil
	})
}

func readyCondition(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestDaemonRestartLosesNoPackets: pod a on node-1 pings pod b on node-2
// every 50 ms while the daemon pod of node-1, then of node-2, is deleted and
// replaced; no echo request goes unanswered.
func TestDaemonRestartLosesNoPackets(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "daemon-restart")
	e.mustCreate(t, ns, pausePod("a", "node-1", nil), pausePod("b", "node-2", nil))
	pods := e.waitPods(t, ns, "a", "b")
	a, b := pods["a"], pods["b"]
	srcNS := e.podNetns(t, &a)
	checkPing(t, "a -> b before the restarts", srcNS, b.Status.PodIP, 3)
	p, err := newPinger(srcNS, b.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	stopc, streamErr := make(chan struct{}), make(chan error, 1)
	go func() { streamErr <- p.stream(50*time.Millisecond, stopc) }()
	finished := false
	defer func() {
		if !finished {
			close(stopc)
			p.finish(0)
		}
	}()
	for _, n := range []string{"node-1", "node-2"} {
		e.replacePods(t, daemonName, n)
	}
	finished = true
	close(stopc)
	if err := <-streamErr; err != nil {
		t.Fatal(err)
	}
	sent, lost := p.finish(3 * time.Second)
	t.Logf("a -> b: %d echo requests over both daemon restarts, %d unanswered", sent, len(lost))
	if sent < 40 {
		t.Fatalf("only %d echo requests were sent during the restarts", sent)
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d echo requests a (%s) -> b (%s) unanswered while the daemons restarted: sequence numbers %v",
			len(lost), sent, a.Status.PodIP, b.Status.PodIP, first(intStrings(lost), 50))
	}
}

func intStrings(v []int) []string {
	out := make([]string, len(v))
	for i, n := range v {
		out[i] = fmt.Sprint(n)
	}
	return out
}

// burst creates pods in the background and returns the channel of its error.
func (e *labEnv) burst(ns string, pods []*corev1.Pod) <-chan error {
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		errc <- e.createPods(ctx, ns, pods, 10)
	}()
	return errc
}

// waitKubeletStarted waits until the kubelet has begun to start at least one
// pod of ns matching sel, and returns how many of them were Running then.
func (e *labEnv) waitKubeletStarted(t *testing.T, ns string, sel map[string]string) int {
	t.Helper()
	running := 0
	eventually(t, "the kubelet started creating a pod of "+ns, 2*time.Minute, func(ctx context.Context) error {
		var l corev1.PodList
		if err := e.c.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels(sel)); err != nil {
			return err
		}
		started := 0
		running = 0
		for _, p := range l.Items {
			if p.Status.StartTime != nil {
				started++
			}
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		if started == 0 {
			return errors.New("no pod has a start time yet")
		}
		return nil
	})
	return running
}

func (e *labEnv) daemonRestarts(ctx context.Context, node string) (int32, error) {
	p, err := e.onlyPod(ctx, daemonName, node)
	if err != nil {
		return 0, err
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == daemonCtr {
			return c.RestartCount, nil
		}
	}
	return 0, fmt.Errorf("daemon pod %s has no container %q", p.Name, daemonCtr)
}

// killDaemon sends SIGKILL to the one estuary-daemon process of node.
func (e *labEnv) killDaemon(t *testing.T, node string) {
	t.Helper()
	pids, err := daemonPIDs(e.nodeNetns[node])
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) != 1 {
		t.Fatalf("found %d estuary-daemon processes in %s's network namespace (%v), want 1", len(pids), node, pids)
	}
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 estuary-daemon pid %d on %s: %v", pids[0], node, err)
	}
	t.Logf("killed estuary-daemon pid %d on %s", pids[0], node)
}

// TestDaemonKilledDuringPodCreationLeavesNoStaleState: the daemon of node-1
// is killed with SIGKILL while 20 pods are being created there; all 20 run
// with distinct addresses, and once deleted they leave no IPInstance, no
// used address, no veth, no table 1000 route and no proxy neighbour behind.
func TestDaemonKilledDuringPodCreationLeavesNoStaleState(t *testing.T) {
	e := needLab(t)
	const node = "node-1"
	ns := e.newNamespace(t, "daemon-kill")
	base := e.settledUsed(t)
	restarts, err := e.daemonRestarts(testCtx(t, time.Minute), node)
	if err != nil {
		t.Fatal(err)
	}
	sel := map[string]string{"app": "burst"}
	created := e.burst(ns, pausePods("burst", 20, []string{node}))
	runningAtKill := e.waitKubeletStarted(t, ns, sel)
	e.killDaemon(t, node)
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	if runningAtKill == 20 {
		t.Fatalf("all 20 pods were Running before the daemon was killed; the kill did not overlap pod creation")
	}
	t.Logf("%d of 20 pods were Running when the daemon was killed", runningAtKill)
	e.waitDaemonRestarted(t, node, restarts)
	pods := e.waitReady(t, ns, sel, 20, 6*time.Minute)
	checkDistinctIPs(t, pods)
	e.checkInstancesMatchPods(t, pods)
	var gone []string
	for _, p := range pods {
		gone = append(gone, p.Status.PodIP)
	}
	e.deletePods(t, ns, sel)
	e.waitNoPods(t, ns, sel, 3*time.Minute)
	e.waitNoInstances(t, ns)
	e.waitUsed(t, base, "the 20 pods were deleted")
	eventually(t, node+"'s kernel holds estuary state only for its live pods", 2*time.Minute, func(ctx context.Context) error {
		return e.kernelMatchesPods(ctx, node, gone)
	})
}

func (e *labEnv) waitDaemonRestarted(t *testing.T, node string, before int32) {
	t.Helper()
	eventually(t, "the killed daemon on "+node+" restarted and Ready", 4*time.Minute, func(ctx context.Context) error {
		n, err := e.daemonRestarts(ctx, node)
		if err != nil {
			return err
		}
		p, err := e.onlyPod(ctx, daemonName, node)
		if err != nil {
			return err
		}
		if n <= before || !readyCondition(p) {
			return fmt.Errorf("restart count %d (was %d), ready %t", n, before, readyCondition(p))
		}
		return nil
	})
}

func checkDistinctIPs(t *testing.T, pods []corev1.Pod) {
	t.Helper()
	if d := duplicates(pods, nil); len(d) > 0 {
		t.Errorf("pods share addresses: %v", d)
	}
}

// TestManagerRestartDuringPodCreationKeepsAddressesUnique: the manager pod
// is force-deleted while 50 pods are being created; all 50 run, and no
// address is held by two pods or two IPInstances.
func TestManagerRestartDuringPodCreationKeepsAddressesUnique(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "manager-restart")
	sel := map[string]string{"app": "mgr"}
	created := e.burst(ns, pausePods("mgr", 50, e.nodes))
	e.waitKubeletStarted(t, ns, sel)
	e.replacePods(t, managerName, "", client.GracePeriodSeconds(0))
	if err := <-created; err != nil {
		t.Fatal(err)
	}
	pods := e.waitReady(t, ns, sel, 50, 8*time.Minute)
	checkDistinctIPs(t, pods)
	e.checkInstancesMatchPods(t, pods)
	e.checkNoDuplicates(t)
}
