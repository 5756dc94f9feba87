//go:build lab

package e2e_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func statefulSet(ns, name string, replicas int32) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			ServiceName:         name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       podTemplate("", netexecContainer()),
			},
		},
	}
}

// TestStatefulSetPodKeepsAddressOnAnotherNodeAndScaleDownReleases: each pod
// of a 3-replica StatefulSet, deleted while its node is cordoned, comes back
// on another node with the same address; scaling to 1 deletes the
// IPInstances of ordinals 1 and 2 and lowers the subnet's used count by 2.
func TestStatefulSetPodKeepsAddressOnAnotherNodeAndScaleDownReleases(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "sts")
	headless := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec:       corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": "web"}, Ports: []corev1.ServicePort{{Port: httpPort}}},
	}
	sts := statefulSet(ns, "web", 3)
	ctx := testCtx(t, time.Minute)
	for _, o := range []client.Object{headless, sts} {
		if err := e.c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	pods := e.waitReady(t, ns, map[string]string{"app": "web"}, 3, 4*time.Minute)
	e.checkInstancesMatchPods(t, pods)
	for _, p := range pods {
		t.Run(p.Name+" moves node with its address", func(t *testing.T) {
			e.moveStatefulPod(t, ns, p.Name, p.Status.PodIP)
		})
	}
	t.Run("scale 3 to 1 releases ordinals 1 and 2", func(t *testing.T) {
		e.checkScaleDownReleases(t, sts)
	})
}

// moveStatefulPod cordons the pod's node, deletes the pod and requires its
// replacement on another node with the same address and a Bound record there.
func (e *labEnv) moveStatefulPod(t *testing.T, ns, name, ip string) {
	var old corev1.Pod
	if err := e.c.Get(testCtx(t, time.Minute), client.ObjectKey{Namespace: ns, Name: name}, &old); err != nil {
		t.Fatalf("get pod %s: %v", name, err)
	}
	from := old.Spec.NodeName
	e.cordon(t, from, true)
	defer e.cordon(t, from, false)
	if err := e.c.Delete(testCtx(t, time.Minute), &old); err != nil {
		t.Fatalf("delete pod %s: %v", name, err)
	}
	var repl corev1.Pod
	eventually(t, fmt.Sprintf("replacement of %s Running and Ready on a node other than %s", name, from), 4*time.Minute, func(ctx context.Context) error {
		if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &repl); err != nil {
			return err
		}
		if repl.UID == old.UID || !podReady(&repl) {
			return fmt.Errorf("not replaced yet: %s", describePod(&repl))
		}
		return nil
	})
	if repl.Spec.NodeName == from {
		t.Fatalf("%s came back on cordoned node %s", name, from)
	}
	if repl.Status.PodIP != ip {
		t.Errorf("%s moved %s -> %s and its address changed: %s -> %s", name, from, repl.Spec.NodeName, ip, repl.Status.PodIP)
	}
	ipi, err := e.podInstance(testCtx(t, time.Minute), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if instanceAddr(ipi) != ip || ipi.Status.Phase != estuaryv1.IPInstanceBound || ipi.Spec.Binding.NodeName != repl.Spec.NodeName {
		t.Errorf("IPInstance %s of %s: %s, phase %q, node %q; want %s, Bound, node %s",
			ipi.Name, name, ipi.Spec.Address.IP, ipi.Status.Phase, ipi.Spec.Binding.NodeName, ip, repl.Spec.NodeName)
	}
}

func (e *labEnv) cordon(t *testing.T, node string, on bool) {
	t.Helper()
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"unschedulable":%t}}`, on))
	if err := e.c.Patch(testCtx(t, time.Minute), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, patch); err != nil {
		t.Fatalf("set node %s unschedulable=%t: %v", node, on, err)
	}
}

func (e *labEnv) checkScaleDownReleases(t *testing.T, sts *appsv1.StatefulSet) {
	before := e.settledUsed(t)
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":1}}`))
	if err := e.c.Patch(testCtx(t, time.Minute), sts, patch); err != nil {
		t.Fatalf("scale statefulset %s to 1: %v", sts.Name, err)
	}
	e.waitReady(t, sts.Namespace, map[string]string{"app": sts.Name}, 1, 3*time.Minute)
	eventually(t, "IPInstances of web-1 and web-2 deleted, web-0's kept", 3*time.Minute, func(ctx context.Context) error {
		l, err := e.instances(ctx, sts.Namespace, nil)
		if err != nil {
			return err
		}
		var held []string
		for _, ipi := range l {
			held = append(held, ipi.Spec.Binding.PodName)
		}
		if len(held) != 1 || held[0] != "web-0" {
			return fmt.Errorf("records held for %v", held)
		}
		return nil
	})
	e.waitUsed(t, before-2, "scale-down released two addresses")
}

// dupMonitor lists every pod and IPInstance over and over and keeps every
// address it ever saw held twice.
type dupMonitor struct {
	stopc chan struct{}
	done  chan struct{}

	mu     sync.Mutex
	seen   map[string]bool
	rounds int
	errs   int
}

func (e *labEnv) watchDuplicates() *dupMonitor {
	m := &dupMonitor{stopc: make(chan struct{}), done: make(chan struct{}), seen: map[string]bool{}}
	go func() {
		defer close(m.done)
		for {
			m.round(e)
			select {
			case <-m.stopc:
				return
			case <-time.After(pollInterval):
			}
		}
	}()
	return m
}

func (m *dupMonitor) round(e *labEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var pods corev1.PodList
	err := e.c.List(ctx, &pods)
	ipis, ierr := e.instances(ctx, "", nil)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil || ierr != nil {
		m.errs++
		return
	}
	m.rounds++
	for _, d := range duplicates(pods.Items, ipis) {
		m.seen[d] = true
	}
}

// stop ends the monitor and returns the duplicates it saw and its rounds.
func (m *dupMonitor) stop() (dups []string, rounds, errs int) {
	close(m.stopc)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := range m.seen {
		dups = append(dups, d)
	}
	return dups, m.rounds, m.errs
}

// TestChurnOf100PodsNeverHoldsAnAddressTwice: 100 pods spread over the
// nodes are created in parallel, then deleted; throughout, no address is
// held by two live pods or two IPInstances, and afterwards the subnet's used
// count is back to where it was.
func TestChurnOf100PodsNeverHoldsAnAddressTwice(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "churn")
	base := e.settledUsed(t)
	sel := map[string]string{"app": "churn"}
	mon := e.watchDuplicates()
	stopped := false
	stop := func() ([]string, int, int) { stopped = true; return mon.stop() }
	defer func() {
		if !stopped {
			mon.stop()
		}
	}()
	if err := e.createPods(testCtx(t, 5*time.Minute), ns, pausePods("churn", 100, e.nodes), 20); err != nil {
		t.Fatal(err)
	}
	pods := e.waitReady(t, ns, sel, 100, 10*time.Minute)
	e.checkInstancesMatchPods(t, pods)
	e.deletePods(t, ns, sel)
	e.waitNoPods(t, ns, sel, 5*time.Minute)
	e.waitNoInstances(t, ns)
	dups, rounds, errs := stop()
	t.Logf("duplicate monitor: %d rounds, %d failed lists", rounds, errs)
	if rounds < 10 {
		t.Errorf("the duplicate monitor completed only %d rounds (%d failed lists); the run was not watched", rounds, errs)
	}
	if len(dups) > 0 {
		t.Errorf("addresses held twice during the churn: %s", strings.Join(dups, "; "))
	}
	e.waitUsed(t, base, "all churn pods deleted")
}
