package cli

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// fakeNodeSide plays, against the test API server, the parts of a cluster
// envtest lacks for the connectivity test's objects: the scheduler, which
// binds each pod of ns to the node of its affinity; a kubelet that reports
// them Running and Ready with an address (all but those in stuck, which it
// reports waiting with a reason); and the namespace controller,
// which empties ns once it is being deleted and finalizes it.
type fakeNodeSide struct {
	ns    string
	stuck map[string]bool
	stop  func()
	mu    sync.Mutex
	errs  []error
}

func startFakeNodeSide(t *testing.T, ns string, stuck ...string) *fakeNodeSide {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeNodeSide{ns: ns, stuck: map[string]bool{}}
	for _, s := range stuck {
		f.stuck[s] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			f.round(ctx, cs)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	f.stop = func() { cancel(); <-done }
	t.Cleanup(func() {
		f.stop()
		for _, err := range f.errs {
			t.Errorf("fake node side: %v", err)
		}
	})
	return f
}

func (f *fakeNodeSide) fail(err error) {
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && !errorsIsCanceled(err) {
		f.mu.Lock()
		f.errs = append(f.errs, err)
		f.mu.Unlock()
	}
}

func errorsIsCanceled(err error) bool { return strings.Contains(err.Error(), "context canceled") }

func (f *fakeNodeSide) round(ctx context.Context, cs kubernetes.Interface) {
	var ns corev1.Namespace
	if err := k8s.Get(ctx, client.ObjectKey{Name: f.ns}, &ns); err != nil {
		return
	}
	var pods corev1.PodList
	if err := k8s.List(ctx, &pods, client.InNamespace(f.ns)); err != nil {
		f.fail(err)
		return
	}
	if ns.DeletionTimestamp != nil {
		f.finalize(ctx, cs, &ns, pods.Items)
		return
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Spec.NodeName == "" {
			// The scheduler's part: bind the pod to the node of its affinity.
			b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name},
				Target: corev1.ObjectReference{Kind: "Node", Name: affinityNode(&p.Spec)}}
			f.fail(cs.CoreV1().Pods(f.ns).Bind(ctx, b, metav1.CreateOptions{}))
			continue
		}
		if !hasCondition(p, corev1.PodReady) && len(p.Status.ContainerStatuses) == 0 {
			f.fail(k8s.Status().Update(ctx, f.kubeletStatus(p, i)))
		}
	}
}

func hasCondition(p *corev1.Pod, c corev1.PodConditionType) bool {
	for _, x := range p.Status.Conditions {
		if x.Type == c {
			return true
		}
	}
	return false
}

// kubeletStatus is the status a kubelet would report for p.
func (f *fakeNodeSide) kubeletStatus(p *corev1.Pod, i int) *corev1.Pod {
	if f.stuck[p.Name] {
		p.Status.Phase = corev1.PodPending
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: probeContainer,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
		return p
	}
	ip := fmt.Sprintf("198.51.100.%d", 10+i)
	if p.Spec.HostNetwork {
		ip = "192.0.2.1"
	}
	p.Status.Phase = corev1.PodRunning
	p.Status.PodIP, p.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
	return p
}

// finalize deletes what ns holds and lets the namespace go, as the
// namespace controller does.
func (f *fakeNodeSide) finalize(ctx context.Context, cs kubernetes.Interface, ns *corev1.Namespace, pods []corev1.Pod) {
	for i := range pods {
		f.fail(k8s.Delete(ctx, &pods[i], client.GracePeriodSeconds(0)))
	}
	f.fail(k8s.DeleteAllOf(ctx, &appsv1.StatefulSet{}, client.InNamespace(f.ns)))
	var svcs corev1.ServiceList
	f.fail(k8s.List(ctx, &svcs, client.InNamespace(f.ns)))
	for i := range svcs.Items {
		f.fail(k8s.Delete(ctx, &svcs.Items[i]))
	}
	if len(pods) > 0 {
		return
	}
	ns.Spec.Finalizers = nil
	_, err := cs.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
	f.fail(err)
}

// testPlan is the plan of a test on nodes conn-a and conn-b with the
// underlay network conn-rack on conn-b.
func testPlan(t *testing.T, ns string) connPlan {
	t.Helper()
	nw := underlayNetwork("conn-rack")
	p, err := makePlan(planInput{Namespace: ns, Nodes: []corev1.Node{readyNode("conn-a"), readyNode("conn-b", inDomains("conn-rack"))},
		Networks: []estuaryv1.Network{nw}, Subnets: []estuaryv1.Subnet{subnetOf("conn-rack-v4", "conn-rack", "9", false)}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func noSay(string, ...any) {}

// createReadyNodes creates Ready, untainted nodes, as the node lifecycle
// controller leaves them (the API server taints a new node not-ready).
func createReadyNodes(t *testing.T, names ...string) {
	t.Helper()
	for _, n := range names {
		nd := readyNode(n)
		create(t, &nd)
		nd.Spec.Taints = nil
		if err := k8s.Update(bg(), &nd); err != nil {
			t.Fatal(err)
		}
		nd.Status = readyNode(n).Status
		if err := k8s.Status().Update(bg(), &nd); err != nil {
			t.Fatal(err)
		}
	}
}

// The test's namespace, pods, StatefulSet and Service are what the plan
// says; a pod that is not Ready, and the StatefulSet's pod that never
// appears, are reported with why; deleting the namespace waits until it is
// gone, and fails when it never goes.
func TestConnectivityObjectsAndCleanup(t *testing.T) {
	ns := "conn-objects"
	p := testPlan(t, ns)
	node := startFakeNodeSide(t, ns, "underlay-1")
	ctx := bg()
	if err := prepareNamespace(ctx, k8s, ns, time.Minute, noSay); err != nil {
		t.Fatal(err)
	}
	if err := createProbes(ctx, k8s, p, "probe:1"); err != nil {
		t.Fatal(err)
	}
	var nsObj corev1.Namespace
	if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, &nsObj); err != nil {
		t.Fatal(err)
	}
	if !ownNamespace(&nsObj) || nsObj.Labels[psaEnforce] != "privileged" {
		t.Errorf("namespace labels %v", nsObj.Labels)
	}
	checkProbePods(t, ns)
	checkRetainAndService(t, ns)

	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "underlay-1."}, Type: corev1.EventTypeWarning,
		Reason: "FailedCreatePodSandBox", Message: "plugin type=estuary failed (add): no address", LastTimestamp: metav1.Now()}
	var u corev1.Pod
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "underlay-1"}, &u); err != nil {
		t.Fatal(err)
	}
	ev.InvolvedObject = corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: u.Name, UID: u.UID}
	if err := k8s.Create(ctx, ev); err != nil {
		t.Fatal(err)
	}
	ready, notReady, err := waitProbes(ctx, k8s, p, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(ready) != 5 || ready[probeClient] == nil || ready[probePolicyTarget] == nil || ready[probeHost].Status.PodIP != "192.0.2.1" {
		t.Errorf("ready pods %v, want client, same-node, other-node, host, policy-target", keysOf(ready))
	}
	wantWhy := map[string]string{
		"underlay-1": "not Ready after 2s: Pending; ContainerCreating; event FailedCreatePodSandBox: plugin type=estuary failed (add): no address",
		retainPod:    `not Ready after 2s: pods "retain-0" not found`,
	}
	if fmt.Sprint(notReady) != fmt.Sprint(wantWhy) {
		t.Errorf("not ready:\n%v\nwant\n%v", notReady, wantWhy)
	}

	start := time.Now()
	if err := deleteNamespace(ctx, k8s, ns, time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("namespace deleted in %s", time.Since(start))
	if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, &nsObj); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after cleanup: %v", ns, err)
	}
	node.stop()

	// Nothing finalizes this one (it stays Terminating in the test API
	// server): the wait ends with the namespace's state.
	stays := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "conn-stays-" + utilrand.String(5)}}
	create(t, stays)
	err = deleteNamespace(ctx, k8s, stays.Name, time.Second)
	if err == nil || !strings.Contains(err.Error(), "namespace not deleted: "+stays.Name+" still there after 1s: Terminating") {
		t.Errorf("namespace that stays: %v", err)
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// checkProbePods: each probe pod runs netexec (pause on the host network)
// on its node, the underlay one asks for its network, and the Service
// selects other-node alone.
func checkProbePods(t *testing.T, ns string) {
	t.Helper()
	var pods corev1.PodList
	if err := k8s.List(bg(), &pods, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	if err := k8s.Get(bg(), client.ObjectKey{Namespace: ns, Name: probeService}, &svc); err != nil {
		t.Fatal(err)
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	want := map[string]string{
		probeClient: "conn-a netexec", probeSame: "conn-a netexec", probeOther: "conn-b netexec",
		probeHost: "conn-a pause host", "underlay-1": "conn-b netexec conn-rack", probePolicyTarget: "conn-b netexec",
	}
	got := map[string]string{}
	for _, p := range pods.Items {
		c := p.Spec.Containers[0]
		s := affinityNode(&p.Spec) + " " + c.Args[0]
		if p.Spec.HostNetwork {
			s += " host"
		}
		if nw := p.Annotations[estuaryv1.AnnotationNetwork]; nw != "" {
			s += " " + nw
		}
		got[p.Name] = s
		if c.Image != "probe:1" || c.Name != probeContainer {
			t.Errorf("pod %s: container %s image %s", p.Name, c.Name, c.Image)
		}
		if sel.Matches(labels.Set(p.Labels)) != (p.Name == probeOther) {
			t.Errorf("service selector %v on pod %s labels %v", sel, p.Name, p.Labels)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pods:\n%v\nwant\n%v", got, want)
	}
	if svc.Spec.Ports[0].Port != servicePort || svc.Spec.Ports[0].TargetPort.IntValue() != netexecPort {
		t.Errorf("service ports %+v", svc.Spec.Ports)
	}
}

// checkRetainAndService: the StatefulSet starts its pod on node B and
// re-creates it only when it is deleted.
func checkRetainAndService(t *testing.T, ns string) {
	t.Helper()
	var sts appsv1.StatefulSet
	if err := k8s.Get(bg(), client.ObjectKey{Namespace: ns, Name: probeRetain}, &sts); err != nil {
		t.Fatal(err)
	}
	if affinityNode(&sts.Spec.Template.Spec) != "conn-b" || sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType ||
		*sts.Spec.Replicas != 1 {
		t.Errorf("statefulset: node %s, update %s, replicas %d; want conn-b, OnDelete, 1",
			affinityNode(&sts.Spec.Template.Spec), sts.Spec.UpdateStrategy.Type, *sts.Spec.Replicas)
	}
}

// A namespace of the test's name the plugin did not make is never used or
// deleted; one it made (a --keep run) is deleted and made again.
func TestConnectivityNamespaceOwnership(t *testing.T) {
	foreign := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "conn-foreign-" + utilrand.String(5)}}
	create(t, foreign)
	createReadyNodes(t, "conn-own-a", "conn-own-b")
	out, err := run(t, "", "connectivity-test", "--test-namespace", foreign.Name)
	if err == nil || !strings.Contains(err.Error(), "namespace "+foreign.Name+" exists and was not made by a connectivity test") {
		t.Errorf("foreign namespace: %v\n%s", err, out)
	}
	if err := k8s.Get(bg(), client.ObjectKeyFromObject(foreign), foreign); err != nil || foreign.DeletionTimestamp != nil {
		t.Errorf("foreign namespace after the refusal: %v, deleting %v", err, foreign.DeletionTimestamp)
	}

	ns := "conn-left"
	startFakeNodeSide(t, ns)
	left := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: connLabels("")}}
	if err := k8s.Create(bg(), left); err != nil {
		t.Fatal(err)
	}
	if err := prepareNamespace(bg(), k8s, ns, time.Minute, noSay); err != nil {
		t.Fatal(err)
	}
	var again corev1.Namespace
	if err := k8s.Get(bg(), client.ObjectKey{Name: ns}, &again); err != nil {
		t.Fatal(err)
	}
	if again.UID == left.UID || again.DeletionTimestamp != nil || again.Labels[psaEnforce] != "privileged" {
		t.Errorf("namespace %s: uid %s (was %s), deleting %v, labels %v; want a new one", ns, again.UID, left.UID, again.DeletionTimestamp, again.Labels)
	}
	if err := deleteNamespace(bg(), k8s, ns, time.Minute); err != nil {
		t.Error(err)
	}
}

// The whole command against the test API server: probe pods come up (the
// fake kubelet), every probe fails because the API server cannot exec in
// them (no kubelet), so each path prints a FAIL line with the exec error or
// a SKIP line, the StatefulSet's pod (no StatefulSet controller) fails its
// path as not Ready, the exit status is 3, and the namespace is gone.
func TestConnectivityCommandReportsFailuresAndCleansUp(t *testing.T) {
	ns := "conn-command"
	createReadyNodes(t, "conn-cmd-a", "conn-cmd-b")
	startFakeNodeSide(t, ns)
	out, err := run(t, "", "connectivity-test", "--test-namespace", ns, "--ready-timeout", "3s",
		"--path-timeout", "1s", "--probe-timeout", "1s", "--cleanup-timeout", "1m")
	t.Logf("output:\n%s", out)
	if ExitCode(err) != 3 {
		t.Fatalf("exit %d (%v), want 3", ExitCode(err), err)
	}
	lines := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(l); len(f) > 1 && (f[0] == statusOK || f[0] == statusFail || f[0] == statusSkip) {
			lines[f[0]+" "+f[1]]++
			if f[0] == statusFail && f[1] != pathRetained && !strings.Contains(l, "exec in pod "+ns+"/") {
				t.Errorf("FAIL line without the exec error: %s", l)
			}
		}
	}
	want := map[string]int{
		"FAIL pod-to-pod/same-node": 2, "FAIL pod-to-pod/across-nodes": 2, "FAIL pod-to-service": 1,
		"FAIL node-to-pod/across-nodes": 1, "FAIL node-to-pod/same-node": 1, "SKIP pod-to-external": 1,
		"SKIP overlay-underlay": 1, "FAIL retained-address": 1, "FAIL policy/deny-ingress": 2, "FAIL policy/allow-ingress": 1,
	}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("lines %v\nwant %v", lines, want)
	}
	requireIn(t, out, `FAIL  retained-address          client (conn-cmd-a, 198.51.100.`, `-> retain-0: pod retain-0 not Ready after 3s: pods "retain-0" not found`,
		"FAIL  policy/deny-ingress       client (conn-cmd-a, 198.51.100.", "-> policy-target (conn-cmd-b, 198.51.100.",
		": not reachable before any policy, so a denial would prove nothing: exec in pod conn-command/client",
		"13 paths: 0 OK, 11 failed, 2 skipped", "deleting namespace conn-command", "namespace conn-command deleted in")
	var gone corev1.Namespace
	if err := k8s.Get(bg(), client.ObjectKey{Name: ns}, &gone); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s after the test: %v", ns, err)
	}
}
