//go:build lab

package e2e_test

// Routine operator actions never take pods down. Pods run on the overlay
// and the underlay, and the upgrade test's probes (ICMP every 0.1 s on one
// node, across nodes and overlay to underlay; HTTP from a node and to a
// Service, a new connection each time) run through each action: the
// DaemonSet deleted and installed again, orphaned and re-created, `helm
// rollback`, the manager's leader killed, the manager's node drained, and a
// newer foreign ClusterNetworkPolicy CRD followed by an estuary upgrade.
// After each, no pod was re-created or restarted, every pod keeps its
// address, a new pod gets one, and the probes lost are reported: none
// wherever the daemons keep running.

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/test/infra/lab"
)

// opProbes are the probes of one action.
type opProbes struct {
	pings []probe
	https []*httpProber
	stop  chan struct{}
	wg    sync.WaitGroup
}

// opPaths are what the probes reach, from the pods of opSetup.
type opPaths struct {
	pings []struct{ what, from, to string }
	https []struct{ what, nsPath, url string }
}

func startOpProbes(t *testing.T, paths opPaths) *opProbes {
	t.Helper()
	p := &opProbes{stop: make(chan struct{})}
	for _, path := range paths.pings {
		pg, err := newPinger(path.from, path.to)
		if err != nil {
			t.Fatal(err)
		}
		p.pings = append(p.pings, probe{path.what, pg})
		p.wg.Go(func() { _ = pg.stream(upgradeProbeInterval, p.stop) })
	}
	for _, h := range paths.https {
		hp := &httpProber{what: h.what, nsPath: h.nsPath, url: h.url}
		p.https = append(p.https, hp)
		p.wg.Go(func() { hp.run(p.stop) })
	}
	return p
}

// finish stops the probes and returns how many were sent and lost, per
// path, in words, and the total lost.
func (p *opProbes) finish() (report []string, lost int) {
	close(p.stop)
	p.wg.Wait()
	for _, pg := range p.pings {
		sent, l := pg.p.finish(3 * time.Second)
		report = append(report, fmt.Sprintf("%s: %d/%d lost", pg.what, len(l), sent))
		lost += len(l)
	}
	for _, h := range p.https {
		report = append(report, fmt.Sprintf("%s: %d/%d failed", h.what, h.failed, h.sent))
		lost += h.failed
	}
	return report, lost
}

// opAction is one operator action; daemonsRun says whether the daemons
// keep running through it (then no probe may be lost).
type opAction struct {
	name       string
	daemonsRun bool
	do         func(t *testing.T, e *labEnv)
}

// probedWorkload runs pods a and b on node-1 and c on node-2 on the
// overlay, under on the underlay, and a Service web over b and c, in a new
// namespace named from prefix; it returns the namespace and the paths the
// probes take: ICMP a -> b (one node), a -> c (across nodes), a -> under
// (overlay to underlay), HTTP node-3 -> a and a -> Service web, each
// checked once before.
func (e *labEnv) probedWorkload(t *testing.T, prefix string) (string, opPaths) {
	t.Helper()
	e.labelNodes(t, rackLabel, rackValue, underlayNodes...)
	e.createUnderlay(t)
	ns := e.newNamespace(t, prefix)
	e.mustCreate(t, ns, netexecPod("a", "node-1", nil), netexecPod("b", "node-1", map[string]string{"app": "web"}),
		netexecPod("c", "node-2", map[string]string{"app": "web"}), underlayPod("under", underlayNodes[0]))
	e.createHTTPService(t, ns, "web", map[string]string{"app": "web"})
	pods := e.waitPods(t, ns, "a", "b", "c", "under")
	a, b, c, under := pods["a"], pods["b"], pods["c"], pods["under"]
	aNS := e.podNetns(t, &a)
	svcURL := fmt.Sprintf("http://%s/hostname", e.serviceIP(t, ns, "web"))
	eventually(t, "a -> Service web", 2*time.Minute, func(ctx context.Context) error { _, err := httpGet(ctx, aNS, svcURL); return err })
	paths := opPaths{
		pings: []struct{ what, from, to string }{
			{"pod -> pod on one node (a -> b)", aNS, b.Status.PodIP},
			{"pod -> pod across nodes (a -> c)", aNS, c.Status.PodIP},
			{"overlay -> underlay (a -> under)", aNS, under.Status.PodIP},
		},
		https: []struct{ what, nsPath, url string }{
			{"node -> pod (node-3 -> a)", e.nodeNetns["node-3"], fmt.Sprintf("http://%s:%d/hostname", a.Status.PodIP, httpPort)},
			{"pod -> Service (a -> web)", aNS, svcURL},
		},
	}
	for _, p := range paths.pings {
		checkPing(t, p.what+" before", p.from, p.to, 3)
	}
	for _, h := range paths.https {
		if _, err := httpGet(testCtx(t, time.Minute), h.nsPath, h.url); err != nil {
			t.Fatalf("%s before: %v", h.what, err)
		}
	}
	return ns, paths
}

// TestOperatorActionsKeepPods runs the operator actions one after another
// on the same pods (see the file's comment).
func TestOperatorActionsKeepPods(t *testing.T) {
	e := needLab(t)
	ctx := testCtx(t, 40*time.Minute)
	ns, paths := e.probedWorkload(t, "operations")
	before := e.podStates(t, ns)

	actions := []opAction{
		{"DaemonSet deleted, then installed again", false, deleteDaemonSetAndReinstall},
		{"DaemonSet orphaned and re-created", true, orphanDaemonSetAndRecreate},
		{"helm rollback", true, helmRollback},
		{"manager leader killed", true, func(t *testing.T, e *labEnv) { e.killLeader(t, true) }},
		{"manager's node drained", true, drainLeaderNode},
		{"newer foreign ClusterNetworkPolicy CRD, then an estuary upgrade", true, foreignCRDThenUpgrade},
	}
	var summary []string
	for i, act := range actions {
		t.Run(act.name, func(t *testing.T) {
			probes := startOpProbes(t, paths)
			start := time.Now()
			act.do(t, e)
			if err := e.waitInstall(); err != nil {
				t.Fatal(err)
			}
			e.waitRolledOut(t)
			report, lost := probes.finish()
			line := fmt.Sprintf("%s (%s): %s", act.name, time.Since(start).Round(time.Second), strings.Join(report, "; "))
			summary = append(summary, line)
			t.Log(line)
			if act.daemonsRun && lost > 0 {
				t.Errorf("%d probes lost while the daemons kept running: %s", lost, strings.Join(report, "; "))
			}
			for _, p := range paths.pings {
				checkPing(t, p.what+" after "+act.name, p.from, p.to, 3)
			}
			after := e.podStates(t, ns)
			for name, s := range before {
				if after[name] != s {
					t.Errorf("pod %s changed: before %+v, after %+v", name, s, after[name])
				}
			}
			fresh := fmt.Sprintf("new-%d", i)
			e.mustCreate(t, ns, pausePod(fresh, "node-3", nil))
			e.waitPods(t, ns, fresh)
		})
		if ctx.Err() != nil {
			break
		}
	}
	t.Log("every action:\n" + strings.Join(summary, "\n"))
}

// helmInstallAgain runs the lab's `helm upgrade --install` of this
// checkout's release with the lab's values and extra arguments.
func (e *labEnv) helmInstallAgain(t *testing.T, extra ...string) {
	t.Helper()
	args := append([]string{"upgrade", "--install", lab.EstuaryRelease, e.estuary.Chart, "--version", e.estuary.ChartVersion,
		"--plain-http", "-n", lab.EstuaryNamespace, "--values", e.estuary.Values, "--wait", "--timeout", "5m"}, extra...)
	if _, err := e.helm(testCtx(t, 6*time.Minute), args...); err != nil {
		t.Fatal(err)
	}
}

// deleteDaemonSet deletes the daemons' DaemonSet with the propagation
// given and waits until it is gone.
func (e *labEnv) deleteDaemonSet(t *testing.T, policy metav1.DeletionPropagation) {
	t.Helper()
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: systemNS, Name: daemonSet}}
	if err := e.c.Delete(testCtx(t, time.Minute), ds, client.PropagationPolicy(policy)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the DaemonSet gone", 2*time.Minute, func(ctx context.Context) error {
		if err := e.c.Get(ctx, client.ObjectKeyFromObject(ds), ds); err == nil {
			return fmt.Errorf("DaemonSet %s still there", daemonSet)
		}
		return nil
	})
}

func deleteDaemonSetAndReinstall(t *testing.T, e *labEnv) {
	e.deleteDaemonSet(t, metav1.DeletePropagationBackground)
	eventually(t, "every daemon pod gone", 2*time.Minute, func(ctx context.Context) error {
		pods, err := e.systemPods(ctx, daemonName, "")
		if err != nil {
			return err
		}
		if len(pods) > 0 {
			return fmt.Errorf("%d daemon pods left", len(pods))
		}
		return nil
	})
	e.helmInstallAgain(t)
}

func orphanDaemonSetAndRecreate(t *testing.T, e *labEnv) {
	before, err := e.systemPods(testCtx(t, time.Minute), daemonName, "")
	if err != nil {
		t.Fatal(err)
	}
	e.deleteDaemonSet(t, metav1.DeletePropagationOrphan)
	e.helmInstallAgain(t)
	after, err := e.systemPods(testCtx(t, time.Minute), daemonName, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := statesOf(after), statesOf(before); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the re-created DaemonSet did not adopt the running daemons: before %v, after %v", want, got)
	}
}

func helmRollback(t *testing.T, e *labEnv) {
	if _, err := e.helm(testCtx(t, 6*time.Minute), "rollback", lab.EstuaryRelease, "-n", lab.EstuaryNamespace, "--wait", "--timeout", "5m"); err != nil {
		t.Fatal(err)
	}
}

// leader returns the manager pod holding the Lease.
func (e *labEnv) leader(ctx context.Context) (*corev1.Pod, error) {
	var lease coordinationv1.Lease
	if err := e.c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: managerName}, &lease); err != nil {
		return nil, fmt.Errorf("leader Lease: %w", err)
	}
	if lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		return nil, fmt.Errorf("no leader holds the Lease")
	}
	pods, err := e.systemPods(ctx, managerName, "")
	if err != nil {
		return nil, err
	}
	// controller-runtime names a holder <hostname>_<uuid>; a replica in the
	// node's network has the node's hostname.
	host, _, _ := strings.Cut(*lease.Spec.HolderIdentity, "_")
	for i := range pods {
		if pods[i].Spec.NodeName == host && pods[i].DeletionTimestamp == nil {
			return &pods[i], nil
		}
	}
	return nil, fmt.Errorf("the Lease's holder %s is no manager pod", *lease.Spec.HolderIdentity)
}

// waitLeader waits until a live manager pod holds the Lease (after a
// takeover the Lease may still name a replica that is gone) and returns it.
func (e *labEnv) waitLeader(t *testing.T) *corev1.Pod {
	t.Helper()
	var p *corev1.Pod
	eventually(t, "a live manager pod leads", 2*time.Minute, func(ctx context.Context) error {
		var err error
		p, err = e.leader(ctx)
		return err
	})
	return p
}

// waitManagersReady waits until the Deployment has every replica available.
func (e *labEnv) waitManagersReady(t *testing.T) {
	t.Helper()
	eventually(t, "every manager replica available", 3*time.Minute, func(ctx context.Context) error {
		var d appsv1.Deployment
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: systemNS, Name: managerDeploy}, &d); err != nil {
			return err
		}
		if d.Spec.Replicas == nil || d.Status.AvailableReplicas != *d.Spec.Replicas || d.Status.UpdatedReplicas != *d.Spec.Replicas || d.Status.Replicas != *d.Spec.Replicas {
			return fmt.Errorf("%d of %d replicas available", d.Status.AvailableReplicas, *d.Spec.Replicas)
		}
		return nil
	})
}

// killLeader kills the leading manager: its pod deleted (the replica
// shuts down and hands the Lease over) when deletePod, else its container
// killed with SIGKILL on its node (a crash: the Lease expires).
func (e *labEnv) killLeader(t *testing.T, deletePod bool) *corev1.Pod {
	t.Helper()
	e.waitManagersReady(t)
	ctx := testCtx(t, time.Minute)
	p := e.waitLeader(t)
	if deletePod {
		if err := e.c.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	id := ""
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == managerCtr {
			id = strings.TrimPrefix(s.ContainerID, "containerd://")
		}
	}
	if id == "" {
		t.Fatalf("manager pod %s runs no container", p.Name)
	}
	if out, err := e.run(ctx, p.Spec.NodeName, "ctr", "-n", "k8s.io", "tasks", "kill", "-s", "SIGKILL", id); err != nil {
		t.Fatalf("kill the leader's container on %s: %v\n%s", p.Spec.NodeName, err, out)
	}
	return p
}

// drainLeaderNode drains the leading manager's node of its manager (kubectl
// drain with the manager's selector: the test's own pods stay) through
// the eviction API, which honours the PodDisruptionBudget, and uncordons it
// once the replacement is available.
func drainLeaderNode(t *testing.T, e *labEnv) {
	e.waitManagersReady(t)
	p := e.waitLeader(t)
	bin, kubeconfig, err := e.kubectlPaths()
	if err != nil {
		t.Fatal(err)
	}
	node := p.Spec.NodeName
	kubectl := func(args ...string) {
		ctx := testCtx(t, 4*time.Minute)
		out, err := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput() // #nosec G204 -- test
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	kubectl("drain", node, "--ignore-daemonsets", "--pod-selector", nameLabel+"="+managerName, "--timeout", "3m")
	defer kubectl("uncordon", node)
	e.waitManagersReady(t)
}

// foreignCRDThenUpgrade raises the ClusterNetworkPolicy CRD's upstream
// bundle version, as applying a newer network-policy-api bundle does, then
// upgrades estuary with a changed value (the managers roll and run the CRD
// upgrader): the newer CRD must stay, and the managers must be ready. The
// CRD and the values are restored afterwards.
func foreignCRDThenUpgrade(t *testing.T, e *labEnv) {
	const name, bundle = "clusternetworkpolicies.policy.networking.k8s.io", "policy.networking.k8s.io/bundle-version"
	ctx := testCtx(t, time.Minute)
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := e.c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	saved := crd.DeepCopy()
	ann := crd.GetAnnotations()
	ann[bundle] = "v9.9.9"
	crd.SetAnnotations(ann)
	if err := e.c.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := testCtx(t, time.Minute)
		cur := saved.DeepCopy()
		if err := e.c.Get(ctx, client.ObjectKey{Name: name}, cur); err == nil {
			cur.SetAnnotations(saved.GetAnnotations())
			cur.Object["spec"] = saved.Object["spec"]
			_ = e.c.Update(ctx, cur)
		}
	})
	e.helmInstallAgain(t, "--set", "manager.logLevel=debug")
	e.waitManagersReady(t)
	if err := e.c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		t.Fatal(err)
	}
	if got := crd.GetAnnotations()[bundle]; got != "v9.9.9" {
		t.Errorf("the managers' CRD upgrader replaced the newer foreign CRD: %s = %q, want v9.9.9", bundle, got)
	}
	e.helmInstallAgain(t)
	e.waitManagersReady(t)
}
