//go:build lab

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/test/infra/lab"
)

const pollInterval = 500 * time.Millisecond

// waitFor polls f until it returns nil or timeout passes; the error names
// what was waited for and f's last error.
func waitFor(what string, timeout time.Duration, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		err := f(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not true after %s: %w", what, timeout, err)
		}
		time.Sleep(pollInterval)
	}
}

// eventually is waitFor that fails the test.
func eventually(t *testing.T, what string, timeout time.Duration, f func(ctx context.Context) error) {
	t.Helper()
	if err := waitFor(what, timeout, f); err != nil {
		t.Fatal(err)
	}
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// newNamespace creates a namespace for one test and deletes it, waiting until
// it is gone, when the test ends.
func (e *labEnv) newNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-" + prefix + "-"}}
	if err := e.c.Create(testCtx(t, time.Minute), ns); err != nil {
		t.Fatalf("create namespace e2e-%s-: %v", prefix, err)
	}
	t.Cleanup(func() { e.deleteNamespace(t, ns.Name) })
	return ns.Name
}

func (e *labEnv) deleteNamespace(t *testing.T, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.c.Delete(ctx, ns); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete namespace %s: %v", name, err)
		return
	}
	err := waitFor("namespace "+name+" deleted", 5*time.Minute, func(ctx context.Context) error {
		err := e.c.Get(ctx, client.ObjectKey{Name: name}, ns)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("namespace %s is %s", name, ns.Status.Phase)
	})
	if err != nil {
		t.Error(err)
	}
}

func podTemplate(node string, c corev1.Container) corev1.PodSpec {
	return corev1.PodSpec{
		NodeName:                      node,
		TerminationGracePeriodSeconds: ptr.To[int64](1),
		Containers:                    []corev1.Container{c},
	}
}

func netexecContainer() corev1.Container {
	return corev1.Container{
		Name: "netexec", Image: lab.AgnhostImage, ImagePullPolicy: corev1.PullNever,
		Args: []string{"netexec", fmt.Sprintf("--http-port=%d", httpPort), fmt.Sprintf("--udp-port=%d", udpPort)},
	}
}

func pauseContainer() corev1.Container {
	return corev1.Container{Name: "pause", Image: lab.PauseImage, ImagePullPolicy: corev1.PullNever}
}

// netexecPod is an agnhost netexec pod on node ("" lets the scheduler pick).
func netexecPod(name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: podTemplate(node, netexecContainer())}
}

func pausePod(name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: podTemplate(node, pauseContainer())}
}

// pausePods are n pause pods name-0..name-(n-1), spread over nodes in turn
// (all on one node when nodes has one entry).
func pausePods(name string, n int, nodes []string) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, n)
	for i := range n {
		pods = append(pods, pausePod(fmt.Sprintf("%s-%d", name, i), nodes[i%len(nodes)], map[string]string{"app": name}))
	}
	return pods
}

// createPods creates pods in ns with up to workers creates in flight.
func (e *labEnv) createPods(ctx context.Context, ns string, pods []*corev1.Pod, workers int) error {
	return e.createPodsWith(ctx, ns, pods, workers, func(ctx context.Context, p *corev1.Pod) error {
		if err := e.c.Create(ctx, p); err != nil {
			return fmt.Errorf("create pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		return nil
	})
}

// createPodsWith creates pods in ns with create, up to workers at once.
func (e *labEnv) createPodsWith(ctx context.Context, ns string, pods []*corev1.Pod, workers int, create func(context.Context, *corev1.Pod) error) error {
	sem := make(chan struct{}, workers)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for _, p := range pods {
		p.Namespace = ns
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := create(ctx, p); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (e *labEnv) mustCreate(t *testing.T, ns string, pods ...*corev1.Pod) {
	t.Helper()
	if err := e.createPods(testCtx(t, 2*time.Minute), ns, pods, 8); err != nil {
		t.Fatal(err)
	}
}

// podReady: running, ready, not being deleted, with an address.
func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// describePod says why a pod is not ready.
func describePod(p *corev1.Pod) string {
	s := fmt.Sprintf("%s on %q: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
	if p.Status.Reason != "" {
		s += fmt.Sprintf(" (%s: %s)", p.Status.Reason, p.Status.Message)
	}
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			s += fmt.Sprintf(" (%s: %s)", w.Reason, w.Message)
		}
	}
	return s
}

// waitReady waits until exactly want pods of ns match sel and all are ready.
func (e *labEnv) waitReady(t *testing.T, ns string, sel map[string]string, want int, timeout time.Duration) []corev1.Pod {
	t.Helper()
	var pods []corev1.Pod
	eventually(t, fmt.Sprintf("%d pods %v in %s Running and Ready with an address", want, sel, ns), timeout, func(ctx context.Context) error {
		var l corev1.PodList
		if err := e.c.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels(sel)); err != nil {
			return err
		}
		var waiting []string
		for i := range l.Items {
			if !podReady(&l.Items[i]) {
				waiting = append(waiting, describePod(&l.Items[i]))
			}
		}
		if len(l.Items) != want || len(waiting) > 0 {
			return fmt.Errorf("%d of %d exist, %d not ready: %s", len(l.Items), want, len(waiting), strings.Join(first(waiting, 5), "; "))
		}
		pods = l.Items
		return nil
	})
	return pods
}

// waitPods waits for the named pods of ns to be ready and returns them by name.
func (e *labEnv) waitPods(t *testing.T, ns string, names ...string) map[string]corev1.Pod {
	t.Helper()
	out := map[string]corev1.Pod{}
	eventually(t, fmt.Sprintf("pods %v in %s Running and Ready with an address", names, ns), 3*time.Minute, func(ctx context.Context) error {
		for _, n := range names {
			var p corev1.Pod
			if err := e.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &p); err != nil {
				return err
			}
			if !podReady(&p) {
				return errors.New(describePod(&p))
			}
			out[n] = p
		}
		return nil
	})
	return out
}

// waitNoPods waits until no pod of ns matches sel.
func (e *labEnv) waitNoPods(t *testing.T, ns string, sel map[string]string, timeout time.Duration) {
	t.Helper()
	eventually(t, fmt.Sprintf("pods %v in %s gone", sel, ns), timeout, func(ctx context.Context) error {
		var l corev1.PodList
		if err := e.c.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels(sel)); err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("%d left, e.g. %s", len(l.Items), describePod(&l.Items[0]))
		}
		return nil
	})
}

func (e *labEnv) deletePods(t *testing.T, ns string, sel map[string]string) {
	t.Helper()
	if err := e.c.DeleteAllOf(testCtx(t, time.Minute), &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabels(sel)); err != nil {
		t.Fatalf("delete pods %v in %s: %v", sel, ns, err)
	}
}

// instances lists the IPInstances matching sel whose binding is in ns (""
// for all namespaces). The namespace is matched on spec.binding, not on a
// label, so a record missing its labels is still found.
func (e *labEnv) instances(ctx context.Context, ns string, sel map[string]string) ([]estuaryv1.IPInstance, error) {
	var l estuaryv1.IPInstanceList
	if err := e.c.List(ctx, &l, client.MatchingLabels(sel)); err != nil {
		return nil, fmt.Errorf("list ipinstances: %w", err)
	}
	if ns == "" {
		return l.Items, nil
	}
	var out []estuaryv1.IPInstance
	for _, ipi := range l.Items {
		if ipi.Spec.Binding.Namespace == ns {
			out = append(out, ipi)
		}
	}
	return out, nil
}

// instanceAddr is an IPInstance's address without its prefix length.
func instanceAddr(ipi *estuaryv1.IPInstance) string {
	p, err := netip.ParsePrefix(ipi.Spec.Address.IP)
	if err != nil {
		return ipi.Spec.Address.IP
	}
	return p.Addr().String()
}

// podInstance is the single IPInstance recorded for a pod.
func (e *labEnv) podInstance(ctx context.Context, ns, pod string) (*estuaryv1.IPInstance, error) {
	l, err := e.instances(ctx, ns, map[string]string{estuaryv1.LabelPod: pod})
	if err != nil {
		return nil, err
	}
	if len(l) != 1 {
		return nil, fmt.Errorf("pod %s/%s has %d IPInstances, want 1", ns, pod, len(l))
	}
	return &l[0], nil
}

// checkInstancesMatchPods asserts that every pod's IPInstance records the
// pod's address.
func (e *labEnv) checkInstancesMatchPods(t *testing.T, pods []corev1.Pod) {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	for _, p := range pods {
		ipi, err := e.podInstance(ctx, p.Namespace, p.Name)
		if err != nil {
			t.Errorf("IPInstance of %s: %v", p.Name, err)
			continue
		}
		if got := instanceAddr(ipi); got != p.Status.PodIP {
			t.Errorf("IPInstance %s of pod %s records %s, pod has %s", ipi.Name, p.Name, got, p.Status.PodIP)
		}
	}
}

// subnetUsed is the overlay subnet's status.used and the number of
// IPInstances recorded in it.
func (e *labEnv) subnetUsed(ctx context.Context) (used int64, records int, err error) {
	var sn estuaryv1.Subnet
	if err := e.c.Get(ctx, client.ObjectKey{Name: overlaySubnet}, &sn); err != nil {
		return 0, 0, fmt.Errorf("get subnet %s: %w", overlaySubnet, err)
	}
	l, err := e.instances(ctx, "", map[string]string{estuaryv1.LabelSubnet: overlaySubnet})
	if err != nil {
		return 0, 0, err
	}
	return sn.Status.Used, len(l), nil
}

// settledUsed waits until the subnet's status.used equals its number of
// IPInstances and returns it: the baseline of a test.
func (e *labEnv) settledUsed(t *testing.T) int64 {
	t.Helper()
	var used int64
	eventually(t, "subnet "+overlaySubnet+" status.used equal to its IPInstance count", 2*time.Minute, func(ctx context.Context) error {
		u, n, err := e.subnetUsed(ctx)
		if err != nil {
			return err
		}
		if u != int64(n) {
			return fmt.Errorf("status.used %d, %d IPInstances", u, n)
		}
		used = u
		return nil
	})
	return used
}

// waitUsed waits until the subnet's status.used is want.
func (e *labEnv) waitUsed(t *testing.T, want int64, why string) {
	t.Helper()
	eventually(t, fmt.Sprintf("subnet %s status.used back to %d (%s)", overlaySubnet, want, why), 3*time.Minute, func(ctx context.Context) error {
		u, n, err := e.subnetUsed(ctx)
		if err != nil {
			return err
		}
		if u != want || int64(n) != want {
			return fmt.Errorf("status.used %d, %d IPInstances", u, n)
		}
		return nil
	})
}

// waitNoInstances waits until ns holds no IPInstance.
func (e *labEnv) waitNoInstances(t *testing.T, ns string) {
	t.Helper()
	eventually(t, "no IPInstance left in "+ns, 3*time.Minute, func(ctx context.Context) error {
		l, err := e.instances(ctx, ns, nil)
		if err != nil {
			return err
		}
		if len(l) > 0 {
			return fmt.Errorf("%d left, e.g. %s for pod %s", len(l), l[0].Spec.Address.IP, l[0].Spec.Binding.PodName)
		}
		return nil
	})
}

// duplicates lists every address held by more than one live pod or by more
// than one IPInstance.
func duplicates(pods []corev1.Pod, ipis []estuaryv1.IPInstance) []string {
	var out []string
	byIP := map[string][]string{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.HostNetwork || p.Status.PodIP == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, ip := range p.Status.PodIPs {
			byIP[ip.IP] = append(byIP[ip.IP], "pod "+p.Namespace+"/"+p.Name)
		}
	}
	out = append(out, collisions(byIP)...)
	byIP = map[string][]string{}
	for i := range ipis {
		byIP[instanceAddr(&ipis[i])] = append(byIP[instanceAddr(&ipis[i])], "ipinstance "+ipis[i].Name)
	}
	return append(out, collisions(byIP)...)
}

func collisions(byIP map[string][]string) []string {
	var out []string
	for ip, holders := range byIP {
		if len(holders) > 1 {
			sort.Strings(holders)
			out = append(out, fmt.Sprintf("%s held by %s", ip, strings.Join(holders, ", ")))
		}
	}
	sort.Strings(out)
	return out
}

// checkNoDuplicates asserts no address is held twice, cluster-wide.
func (e *labEnv) checkNoDuplicates(t *testing.T) {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	var pods corev1.PodList
	if err := e.c.List(ctx, &pods); err != nil {
		t.Fatalf("list pods: %v", err)
	}
	ipis, err := e.instances(ctx, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := duplicates(pods.Items, ipis); len(d) > 0 {
		t.Errorf("addresses held twice: %s", strings.Join(d, "; "))
	}
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
