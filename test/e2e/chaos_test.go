//go:build lab

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/ipamcheck"
)

// The chaos suite: waves of pod creations and deletions across the nodes
// while, in turn, the manager is killed every 20 s, the API server is
// restarted, a daemon is killed with SIGKILL in the middle of ADDs, a node
// is deleted under its pods, and pods are force-deleted. For the whole run
// the manager loses the answer to every loseEvery-th IPInstance write after
// the API server stored it, a retaining Deployment has half its pods
// deleted every wave (and is deleted and created again in two waves), and
// a Deployment with addresses reserved for it has all its pods deleted
// every wave. Afterwards, within one GC period, no address may be recorded
// twice, no pod may hold two addresses of one family, no record may be
// left over, every Subnet's count must equal a recount, and no node's
// kernel may hold state for a pod that is gone; every live pod must have
// exactly its recorded addresses configured in its network namespace, no
// address configured in two pods; every new pod of the two Deployments
// must run on an address kept or reserved for it; answers must in fact
// have been lost; a pod pinging across the daemon kills must lose no echo.

// loseEvery is the manager's --fault-lose-answers in the chaos suite.
const loseEvery = 5

// chaosFault is one phase of the suite: start runs at the beginning of a
// wave (after its pods are submitted) and returns a stop function.
type chaosFault struct {
	name  string
	start func(t *testing.T, e *labEnv, ns string, wave int) (stop func())
	// force deletes the wave's pods with no grace period.
	force bool
}

func chaosWaves() (waves, perWave int) {
	waves, perWave = 20, 50
	if v, err := strconv.Atoi(os.Getenv("ESTUARY_CHAOS_WAVES")); err == nil && v > 0 {
		waves = v
	}
	return waves, perWave
}

func TestChaosNeverDuplicatesOrLeaks(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "chaos")
	waves, perWave := chaosWaves()
	faults := []chaosFault{
		{name: "manager killed every 20s", start: killManagerEvery(20 * time.Second)},
		{name: "API server restarted", start: restartAPIServerOnce},
		{name: "daemon killed mid-ADD", start: killDaemonMidAdd},
		{name: "node deleted under its pods", start: deleteNodeUnderPods},
		{name: "pods force-deleted", start: noFault, force: true},
	}
	plugin := e.plugin(t)
	logs := e.loseManagerAnswers(t, ns, loseEvery)
	ping := e.startChaosPing(t, ns)
	keep := e.startRetaining(t, ns, logs)
	resv := e.startReserved(t, ns, plugin, logs)
	redeployAt := map[int]bool{waves / 3: true, 2 * waves / 3: true}
	start := time.Now()
	created, deleted := 0, 0
	for w := range waves {
		f := faults[w*len(faults)/waves]
		name := fmt.Sprintf("chaos-w%d", w)
		sel := map[string]string{"app": name}
		submitted := e.persistentBurst(ns, pausePods(name, perWave, e.nodes))
		stop := f.start(t, e, ns, w)
		if redeployAt[w] {
			e.redeployWorkload(t, keep)
		} else {
			e.churn(t, keep, f.force)
		}
		e.churn(t, resv, f.force)
		if err := <-submitted; err != nil {
			stop()
			t.Fatalf("wave %d (%s): %v", w, f.name, err)
		}
		e.waitReady(t, ns, sel, perWave, 8*time.Minute)
		e.settleWorkload(t, keep)
		e.settleWorkload(t, resv)
		stop()
		created += perWave
		var opts []client.DeleteAllOfOption
		if f.force {
			opts = append(opts, client.GracePeriodSeconds(0))
		}
		if err := e.c.DeleteAllOf(testCtx(t, time.Minute), &corev1.Pod{}, append(opts, client.InNamespace(ns), client.MatchingLabels(sel))...); err != nil {
			t.Fatalf("wave %d: delete its pods: %v", w, err)
		}
		deleted += perWave
		t.Logf("wave %d (%s): %d pods up and deleted, %s since the start; %s; %s", w, f.name, perWave, time.Since(start).Round(time.Second), keep.summary(), resv.summary())
	}
	sent, lost := ping.finish(t)
	for w := range waves {
		e.waitNoPods(t, ns, map[string]string{"app": fmt.Sprintf("chaos-w%d", w)}, 5*time.Minute)
		// Pods of a deleted node are removed by the pod garbage collector.
		e.waitNoPods(t, ns, map[string]string{"app": fmt.Sprintf("ghost-w%d", w)}, 5*time.Minute)
	}
	report := e.waitIPAMClean(t, 4*time.Minute)
	for _, node := range e.nodes {
		eventually(t, node+"'s kernel holds estuary state only for its live pods", 2*time.Minute, func(ctx context.Context) error {
			return e.kernelMatchesPods(ctx, node, nil)
		})
	}
	configured := e.checkConfigured(t, ns)
	logs.finish()
	faultOn, managers, lostAnswers := logs.counts()
	summary := fmt.Sprintf("chaos: %d creations, %d deletions in %s; recorded twice %d, pods with two addresses %d, leaked records %d, missing records %d, shared addresses %d, subnet count drifts %d, lost pings %d of %d",
		created, deleted, time.Since(start).Round(time.Second), report.Count(ipamcheck.Misnamed), report.Count(ipamcheck.TwoAddresses),
		report.Count(ipamcheck.Leaked), report.Count(ipamcheck.Missing), report.Count(ipamcheck.SharedAddress), report.Count(ipamcheck.CountDrift), len(lost), sent)
	summary2 := fmt.Sprintf("chaos: %d live pods read in their network namespaces: configured != recorded %d, shared %d, missing families %d, lost answers %d (%d of %d manager pods logged fault injection on)",
		configured.pods, configured.differ, configured.shared, configured.missingFamilies, lostAnswers, faultOn, managers)
	for _, line := range []string{summary, summary2, "chaos: " + keep.summary(), "chaos: " + resv.summary()} {
		fmt.Println(line)
		t.Log(line)
	}
	if len(report.Findings) > 0 {
		t.Errorf("IPAM is not clean one GC period after the chaos:\n%s", findingLines(report))
	}
	if sent < 100 {
		t.Errorf("only %d echo requests crossed the daemon kills", sent)
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d echo requests lost across the daemon kills: sequence numbers %v", len(lost), sent, first(intStrings(lost), 50))
	}
	if len(configured.problems) > 0 {
		t.Errorf("pods whose configured addresses are not their records:\n%s", strings.Join(configured.problems, "\n"))
	}
	if lostAnswers == 0 {
		t.Errorf("no manager log names an injected fault: no answer to an IPInstance write was lost (%d of %d manager pods logged fault injection on)", faultOn, managers)
	} else {
		t.Logf("lost answers, e.g.:\n%s", strings.Join(logs.lostLines(3), "\n"))
	}
	for _, w := range []*chaosWorkload{keep, resv} {
		if w.started == 0 || w.onHeld != w.started {
			t.Errorf("%d of %d new pods of deployment %s ran on an address %s for it", w.onHeld, w.started, w.name, w.kind())
		}
	}
	e.releaseWorkloads(t, plugin, keep, resv)
}

// persistentBurst creates pods in the background as a controller would:
// a create that fails for a reason that may pass (the API server
// restarting, a lost response) is tried again, and AlreadyExists after such
// a failure means the first try was committed.
func (e *labEnv) persistentBurst(ns string, pods []*corev1.Pod) <-chan error {
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		errc <- e.createPodsWith(ctx, ns, pods, 10, e.createUntilDone)
	}()
	return errc
}

func (e *labEnv) createUntilDone(ctx context.Context, p *corev1.Pod) error {
	for tried := false; ; tried = true {
		err := e.c.Create(ctx, p.DeepCopy())
		switch {
		case err == nil, tried && apierrors.IsAlreadyExists(err):
			return nil
		case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsAlreadyExists(err):
			return fmt.Errorf("create pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create pod %s/%s: %w (last error %w)", p.Namespace, p.Name, ctx.Err(), err)
		case <-time.After(time.Second):
		}
	}
}

func findingLines(r ipamcheck.Report) string {
	var b strings.Builder
	for i, f := range r.Findings {
		if i == 30 {
			fmt.Fprintf(&b, "... and %d more\n", len(r.Findings)-i)
			break
		}
		b.WriteString(f.String() + "\n")
	}
	return b.String()
}

// waitIPAMClean waits until a check confirmed by a second one finds
// nothing, and returns the last report.
func (e *labEnv) waitIPAMClean(t *testing.T, within time.Duration) ipamcheck.Report {
	t.Helper()
	var last ipamcheck.Report
	err := waitFor("IPAM clean (records, pods and Subnet counts agree)", within, func(ctx context.Context) error {
		r, err := ipamcheck.CheckTwice(ctx, e.c, 0, 3*time.Second)
		if err != nil {
			return err
		}
		last = r
		if len(r.Findings) > 0 {
			return fmt.Errorf("%d findings, first %s", len(r.Findings), r.Findings[0])
		}
		return nil
	})
	if err != nil {
		t.Log(err)
	}
	return last
}

func noFault(*testing.T, *labEnv, string, int) func() { return func() {} }

// killManagerEvery kills the leading manager's process with SIGKILL every
// period while the wave runs.
func killManagerEvery(period time.Duration) func(*testing.T, *labEnv, string, int) func() {
	return func(t *testing.T, e *labEnv, _ string, _ int) func() {
		stopc, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			tick := time.NewTicker(period)
			defer tick.Stop()
			for {
				if err := e.killManager(); err != nil {
					t.Logf("kill the manager: %v", err)
				}
				select {
				case <-stopc:
					return
				case <-tick.C:
				}
			}
		}()
		return func() { close(stopc); <-done }
	}
}

// killManager force-deletes every manager pod: the kubelet kills the
// process at once and its Deployment starts another pod, which must wait
// out the dead leader's lease. (Killing the process instead would let the
// kubelet's crash-loop back-off, not the manager, decide how long it is
// down.)
func (e *labEnv) killManager() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := e.systemPods(ctx, managerName, "")
	if err != nil {
		return err
	}
	killed := 0
	for i := range pods {
		if pods[i].DeletionTimestamp != nil {
			continue
		}
		if err := e.c.Delete(ctx, &pods[i], client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("force-delete manager pod %s: %w", pods[i].Name, err)
		}
		killed++
	}
	if killed == 0 {
		return errors.New("no live manager pod")
	}
	return nil
}

// restartAPIServerOnce kills the API server with SIGKILL while the wave's
// pods are being set up, and starts it again.
func restartAPIServerOnce(t *testing.T, e *labEnv, _ string, _ int) func() {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, e.labArgs("restart", "kube-apiserver")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("restart the API server: %v\n%s", err, out)
	}
	return func() {}
}

// killDaemonMidAdd kills one node's daemon (a different node each wave) once
// its kubelet has begun to start the wave's pods.
func killDaemonMidAdd(t *testing.T, e *labEnv, ns string, wave int) func() {
	t.Helper()
	node := e.nodes[wave%len(e.nodes)]
	restarts, err := e.daemonRestarts(testCtx(t, time.Minute), node)
	if err != nil {
		t.Fatal(err)
	}
	e.waitKubeletStarted(t, ns, map[string]string{"app": fmt.Sprintf("chaos-w%d", wave)})
	e.killDaemon(t, node)
	return func() { e.waitDaemonRestarted(t, node, restarts) }
}

// deleteNodeUnderPods registers a node that no kubelet runs, puts pods on
// it (the manager gives them addresses), and deletes the node: the pod
// garbage collector deletes its pods and their addresses must come back.
func deleteNodeUnderPods(t *testing.T, e *labEnv, ns string, wave int) func() {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("chaos-ghost-%d", wave)}}
	if err := e.c.Create(testCtx(t, time.Minute), node); err != nil {
		t.Fatalf("create node %s: %v", node.Name, err)
	}
	name := fmt.Sprintf("ghost-w%d", wave)
	pods := pausePods(name, 10, []string{node.Name})
	if err := e.createPods(testCtx(t, time.Minute), ns, pods, 10); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the manager recorded the pods on "+node.Name, 3*time.Minute, func(ctx context.Context) error {
		for _, p := range pods {
			if _, err := e.podInstance(ctx, ns, p.Name); err != nil {
				return err
			}
		}
		return nil
	})
	if err := e.c.Delete(testCtx(t, time.Minute), node); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete node %s: %v", node.Name, err)
	}
	return func() {}
}

// chaosPing is pod a on one node pinging pod b on another every 50 ms for
// the whole suite.
type chaosPing struct {
	p     *pinger
	stopc chan struct{}
	errc  chan error
}

func (e *labEnv) startChaosPing(t *testing.T, ns string) *chaosPing {
	t.Helper()
	e.mustCreate(t, ns, pausePod("ping-a", e.nodes[0], nil), pausePod("ping-b", e.nodes[1], nil))
	pods := e.waitPods(t, ns, "ping-a", "ping-b")
	a, b := pods["ping-a"], pods["ping-b"]
	srcNS := e.podNetns(t, &a)
	checkPing(t, "ping-a -> ping-b before the chaos", srcNS, b.Status.PodIP, 3)
	p, err := newPinger(srcNS, b.Status.PodIP)
	if err != nil {
		t.Fatal(err)
	}
	c := &chaosPing{p: p, stopc: make(chan struct{}), errc: make(chan error, 1)}
	go func() { c.errc <- p.stream(50*time.Millisecond, c.stopc) }()
	return c
}

func (c *chaosPing) finish(t *testing.T) (sent int, lost []int) {
	t.Helper()
	close(c.stopc)
	if err := <-c.errc; err != nil {
		t.Fatal(err)
	}
	return c.p.finish(3 * time.Second)
}
