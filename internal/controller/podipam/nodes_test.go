package podipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/cnibackend/ipwait"
)

// nodes stands in for the nodes' daemons and kubelets: for a pod it runs
// the daemon's own address wait (package ipwait, as a CNI ADD does) once,
// remembers what the node set up, and reports it in the pod's
// status.podIPs, as the kubelet does. check then compares what each node
// set up with the records.
type nodes struct {
	waiters map[string]*ipwait.Waiter
	mu      sync.Mutex
	set     map[string][]netip.Addr // namespace/pod -> what its node set up
}

// startNodes starts one daemon view of the records for the named nodes.
func startNodes(t *testing.T, names ...string) *nodes {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	view, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	n := &nodes{waiters: map[string]*ipwait.Waiter{}, set: map[string][]netip.Addr{}}
	for _, name := range names {
		if n.waiters[name], err = ipwait.New(ctx, view, name, nil); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = view.Start(ctx) }()
	if !view.WaitForCacheSync(ctx) {
		t.Fatal("the nodes' view of the records did not sync")
	}
	return n
}

// add sets pod up on its node: it waits (at most 30 s) for the addresses
// the manager gave it, as a CNI ADD does, and reports them on the pod.
func (n *nodes) add(t *testing.T, pod *corev1.Pod) []netip.Addr {
	t.Helper()
	got, err := n.tryAdd(pod, 30*time.Second, true)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// tryAdd is add that returns the failure; without report, the kubelet is
// slow: the pod's status is left as it is.
func (n *nodes) tryAdd(pod *corev1.Pod, within time.Duration, report bool) ([]netip.Addr, error) {
	w := n.waiters[pod.Spec.NodeName]
	if w == nil {
		return nil, fmt.Errorf("pod %s/%s is on node %q, which is not simulated", pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	addrs, err := w.Wait(ctx, pod.Namespace, pod.Name, string(pod.UID))
	if err != nil {
		return nil, fmt.Errorf("ADD of pod %s/%s on %s: %w", pod.Namespace, pod.Name, pod.Spec.NodeName, err)
	}
	var got []netip.Addr
	for _, a := range addrs {
		got = append(got, a.IP.Addr())
	}
	n.mu.Lock()
	n.set[pod.Namespace+"/"+pod.Name] = got
	n.mu.Unlock()
	if !report {
		return got, nil
	}
	return got, reportPodIPs(pod, got)
}

// addAll sets up, at once, each of count pods that pod makes (it may
// create them), as their nodes' ADDs do, each within the given time; it
// reports every failure with t.Error and whether all succeeded.
func (n *nodes) addAll(t *testing.T, count int, within time.Duration, pod func(i int) *corev1.Pod) bool {
	t.Helper()
	errs := make(chan error, count)
	var wg sync.WaitGroup
	for i := range count {
		wg.Go(func() {
			_, err := n.tryAdd(pod(i), within, true)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	ok := true
	for err := range errs {
		if err != nil {
			t.Error(err)
			ok = false
		}
	}
	return ok
}

// reportPodIPs writes status.podIPs as the kubelet does after an ADD.
func reportPodIPs(pod *corev1.Pod, addrs []netip.Addr) error {
	p := &corev1.Pod{}
	if err := k8s.Get(bg(), client.ObjectKeyFromObject(pod), p); err != nil {
		return err
	}
	p.Status.PodIPs = nil
	for _, a := range addrs {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: a.String()})
	}
	if len(addrs) > 0 {
		p.Status.PodIP = addrs[0].String()
	}
	return k8s.Status().Update(bg(), p)
}

// check waits until the records of every pod the nodes set up in ns name
// exactly what its node set up, one per family, and until no address is
// set up in two live pods; it fails the test at the deadline with what
// still differs.
func (n *nodes) check(t *testing.T, ns string) {
	t.Helper()
	eventually(t, "every pod's records equal what its node set up", func() error {
		return n.compare(t, ns)
	})
}

func (n *nodes) compare(t *testing.T, ns string) error {
	n.mu.Lock()
	set := map[string][]netip.Addr{}
	for k, v := range n.set {
		set[k] = v
	}
	n.mu.Unlock()
	recorded := map[string][]netip.Addr{}
	for _, ipi := range allInstances(t, ns) {
		if ipi.Status.Phase == estuaryv1.IPInstanceBound {
			k := ipi.Spec.Binding.Namespace + "/" + ipi.Spec.Binding.PodName
			recorded[k] = append(recorded[k], addrOf(t, ipi))
		}
	}
	users := map[netip.Addr]string{}
	for k, addrs := range set {
		if !sameNamespace(k, ns) || !alive(t, k) {
			continue
		}
		for _, a := range addrs {
			if other, ok := users[a]; ok {
				return fmt.Errorf("address %s is set up in pods %s and %s", a, other, k)
			}
			users[a] = k
		}
		got := slices.Clone(recorded[k])
		slices.SortFunc(got, netip.Addr.Compare)
		want := slices.Clone(addrs)
		slices.SortFunc(want, netip.Addr.Compare)
		if !slices.Equal(got, want) {
			return fmt.Errorf("pod %s: its node set up %v, its Bound records say %v", k, want, got)
		}
	}
	return nil
}

// alive: the pod of key exists and is not being deleted.
func alive(t *testing.T, key string) bool {
	t.Helper()
	ns, name := splitKey(key)
	p := &corev1.Pod{}
	err := k8s.Get(bg(), client.ObjectKey{Namespace: ns, Name: name}, p)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil && p.DeletionTimestamp == nil
}

func sameNamespace(key, ns string) bool {
	p, _ := splitKey(key)
	return p == ns
}
