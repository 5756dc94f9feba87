package podipam

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/workload"
)

// lostBind wraps the manager's client: the first update that binds an
// address to pod is stored by the API server but answered with a timeout,
// and from then on the manager's reads of that pod wait until the test
// opens the gate, so that other pods are served before the manager looks
// at pod again.
type lostBind struct {
	pod  string
	lost atomic.Bool
	gate chan struct{}
	once sync.Once
}

func newLostBind(t *testing.T, pod string) *lostBind {
	l := &lostBind{pod: pod, gate: make(chan struct{})}
	t.Cleanup(l.open)
	return l
}

func (l *lostBind) open() { l.once.Do(func() { close(l.gate) }) }

func (l *lostBind) wrap(c client.WithWatch) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			if err := c.Update(ctx, obj, opts...); err != nil {
				return err
			}
			ipi, ok := obj.(*estuaryv1.IPInstance)
			if ok && ipi.Status.Phase == estuaryv1.IPInstanceBound && ipi.Spec.Binding.PodName == l.pod && l.lost.CompareAndSwap(false, true) {
				return apierrors.NewTimeoutError("the answer to this update was lost", 1)
			}
			return nil
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Pod); ok && key.Name == l.pod && l.lost.Load() {
				select {
				case <-l.gate:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
}

// keptAddress makes Deployment web in ns keep one address on network (a
// retaining pod that is then deleted) and returns it with the pod option
// that makes a pod one of web's next ReplicaSet's.
func keptAddress(t *testing.T, ns, network string) (netip.Addr, podOpt) {
	t.Helper()
	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	old := newPod(t, ns, "web-a-0", deployment(t, ns, "web", "a"), retain, onNetwork(network))
	kept := waitInstances(t, ns, old.Name, 1, estuaryv1.IPInstanceBound)
	deletePod(t, old)
	waitOwned(t, ns, "Deployment", "web", 1, estuaryv1.IPInstanceRetained)
	return addrOf(t, kept[0]), deployment(t, ns, "web", "b")
}

// A kept address handed to pod P by an update the API server stored but
// whose answer was lost stays P's: P's node has set it up, so pod Q of the
// same workload, served before the manager looks at P again, gets another
// address. Before, the manager gave the address back to the pool, Q took
// it, the record was overwritten for Q, and both nodes set it up.
func TestLostHandOverAnswerKeepsTheAddressWithItsPod(t *testing.T) {
	overlay(t, "ov-lb-kept", "10.71.0.0/24")
	ns := newNamespace(t, nil)
	lb := newLostBind(t, "web-b-0")
	r, _ := startManagerWith(t, testManager{rc: cfg, client: lb.wrap})
	eventually(t, "allocator rebuilt", func() error { return r.Ready() })
	nodes := startNodes(t, "node-a", "node-b")
	kept, next := keptAddress(t, ns, "ov-lb-kept")

	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	p := newPod(t, ns, "web-b-0", next, retain, onNetwork("ov-lb-kept"), onNode("node-a"))
	if got := nodes.add(t, p); !slices.Equal(got, []netip.Addr{kept}) {
		t.Fatalf("P's node set up %v, want the kept %s", got, kept)
	}
	if !lb.lost.Load() {
		t.Fatal("the answer to P's hand-over was not lost: the test proves nothing")
	}
	q := newPod(t, ns, "web-b-1", next, retain, onNetwork("ov-lb-kept"), onNode("node-b"))
	if got := nodes.add(t, q); slices.Contains(got, kept) {
		t.Errorf("Q's node set up %v, the address P's node has", got)
	}
	lb.open()
	nodes.check(t, ns)
	if got := addrsOf(t, waitInstances(t, ns, p.Name, 1, estuaryv1.IPInstanceBound)); !slices.Equal(got, []netip.Addr{kept}) {
		t.Errorf("P is recorded with %v, want %s", got, kept)
	}
}

// The same through a pod that names the kept address (ip-address): after
// the lost answer, the next pod naming it waits for P rather than taking
// it.
func TestLostHandOverAnswerOfANamedAddress(t *testing.T) {
	overlay(t, "ov-lb-named", "10.72.0.0/24")
	ns := newNamespace(t, nil)
	lb := newLostBind(t, "web-b-0")
	r, _ := startManagerWith(t, testManager{rc: cfg, client: lb.wrap})
	eventually(t, "allocator rebuilt", func() error { return r.Ready() })
	nodes := startNodes(t, "node-a", "node-b")
	kept, next := keptAddress(t, ns, "ov-lb-named")

	named := annotated(estuaryv1.AnnotationIPAddress, kept.String())
	p := newPod(t, ns, "web-b-0", next, named, onNetwork("ov-lb-named"), onNode("node-a"))
	if got := nodes.add(t, p); !slices.Equal(got, []netip.Addr{kept}) {
		t.Fatalf("P's node set up %v, want the kept %s", got, kept)
	}
	if !lb.lost.Load() {
		t.Fatal("the answer to P's hand-over was not lost: the test proves nothing")
	}
	q := newPod(t, ns, "web-b-1", next, named, onNetwork("ov-lb-named"), onNode("node-b"))
	eventually(t, "Q waits for P's address", func() error {
		return eventNote(ns, q.Name, ReasonWaitingForAddress, kept.String()+" (pod "+ns+"/web-b-0)")
	})
	lb.open()
	nodes.check(t, ns)
	if got := addrsOf(t, waitInstances(t, ns, p.Name, 1, estuaryv1.IPInstanceBound)); !slices.Equal(got, []netip.Addr{kept}) {
		t.Errorf("P is recorded with %v, want %s", got, kept)
	}
	if n := len(instancesOf(t, ns, q.Name)); n != 0 {
		t.Errorf("Q has %d records while P holds the address it names", n)
	}
}

// slowCreates wraps a client so that creates of IPv6 records for pod wait
// until delay has passed: the window in which a pod's first family is
// recorded and its second is not.
func slowCreates(pod string, delay time.Duration) func(client.WithWatch) client.Client {
	return func(c client.WithWatch) client.Client {
		return interceptor.NewClient(c, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if ipi, ok := obj.(*estuaryv1.IPInstance); ok && ipi.Spec.Binding.PodName == pod && ipi.Spec.Address.Version == 6 {
					select {
					case <-time.After(delay):
					case <-ctx.Done():
						return ctx.Err()
					}
				}
				return c.Create(ctx, obj, opts...)
			},
		})
	}
}

// A dual-stack pod that takes an address reserved for its workload is set
// up with both families: the reserved record, bound first, says the pod
// has two addresses, so the node waits for the second. Before, the record
// carried no count and the node's ADD returned with IPv4 only.
func TestDualStackPodTakingAReservedAddressGetsBothFamilies(t *testing.T) {
	overlay(t, "ov-lb-dual", "10.73.0.0/24", "fd00:73::/64")
	ns := newNamespace(t, nil)
	r, _ := startManagerWith(t, testManager{rc: cfg, client: slowCreates("web-a-0", 3*time.Second)})
	eventually(t, "allocator rebuilt", func() error { return r.Ready() })
	nodes := startNodes(t, "node-a")
	reserve(t, ns, "ov-lb-dual", "10.73.0.5/24", "Deployment", "web")
	waitUsed(t, "ov-lb-dual-0", 1)

	p := newPod(t, ns, "web-a-0", deployment(t, ns, "web", "a"), onNetwork("ov-lb-dual"))
	got := nodes.add(t, p)
	if len(got) != 2 || !got[0].Is4() || !got[1].Is6() {
		t.Fatalf("the node set up %v, want one IPv4 and one IPv6 address", got)
	}
	if got[0] != netip.MustParseAddr("10.73.0.5") {
		t.Errorf("the node set up %s, want the reserved 10.73.0.5", got[0])
	}
	for _, ipi := range waitInstances(t, ns, p.Name, 2, estuaryv1.IPInstanceBound) {
		if countOf(&ipi) != 2 {
			t.Errorf("record %s says the pod has %q addresses, want 2", ipi.Name, ipi.Annotations[estuaryv1.AnnotationAddresses])
		}
	}
	nodes.check(t, ns)
}

// An IPv4-only pod that takes an IPv4 address kept from a dual-stack pod is
// set up at once: the record says one address now. Before, it still said
// two, and the node waited for an IPv6 record that never came.
func TestSingleStackPodTakingADualStackKeptAddress(t *testing.T) {
	overlay(t, "ov-lb-single", "10.74.0.0/24", "fd00:74::/64")
	ns := newNamespace(t, nil)
	startManager(t)
	nodes := startNodes(t, "node-a")
	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	old := newPod(t, ns, "web-a-0", deployment(t, ns, "web", "a"), retain, onNetwork("ov-lb-single"))
	kept := waitInstances(t, ns, old.Name, 2, estuaryv1.IPInstanceBound)
	deletePod(t, old)
	waitOwned(t, ns, "Deployment", "web", 2, estuaryv1.IPInstanceRetained)

	p := newPod(t, ns, "web-b-0", deployment(t, ns, "web", "b"), retain, onNetwork("ov-lb-single"),
		annotated(estuaryv1.AnnotationIPFamily, estuaryv1.IPFamilyIPv4))
	got := nodes.add(t, p)
	var v4 netip.Addr
	for _, a := range addrsOf(t, kept) {
		if a.Is4() {
			v4 = a
		}
	}
	if !slices.Equal(got, []netip.Addr{v4}) {
		t.Fatalf("the node set up %v, want the kept IPv4 address %s alone", got, v4)
	}
	nodes.check(t, ns)
}

// A pod that holds two addresses of one family (a second manager recorded
// another one for it) keeps the one its node set up, which the kubelet
// reports, and nothing is released before that report. Before, the manager
// kept the lower address at once and released the one the node had set
// up.
func TestExtraAddressKeepsTheOneItsNodeSetUp(t *testing.T) {
	overlay(t, "ov-lb-extra", "10.75.0.0/24")
	ns := newNamespace(t, nil)
	r, _ := startManagerWith(t, testManager{rc: cfg, audit: 300 * time.Millisecond})
	eventually(t, "allocator rebuilt", func() error { return r.Ready() })
	nodes := startNodes(t, "node-a")
	first := newPod(t, ns, "first", onNetwork("ov-lb-extra"))
	lower := addrOf(t, waitInstances(t, ns, first.Name, 1, estuaryv1.IPInstanceBound)[0])
	deletePod(t, first)
	waitUsed(t, "ov-lb-extra-0", 0)

	p := newPod(t, ns, "p", onNetwork("ov-lb-extra"))
	set, err := nodes.tryAdd(p, 30*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(set) != 1 || !lower.Less(set[0]) {
		t.Fatalf("the node set up %v; the test needs one address above %s", set, lower)
	}
	other := halfRecord(t, p, "ov-lb-extra", netip.PrefixFrom(lower, 24), func(ipi *estuaryv1.IPInstance) {
		ipi.Annotations[estuaryv1.AnnotationAddresses] = "1"
	})
	eventually(t, "the manager sees the second record and waits", func() error {
		return logged(r, other.Name)
	})
	if n := len(instancesOf(t, ns, p.Name)); n != 2 {
		t.Fatalf("pod has %d records before it reports the address it uses, want both kept", n)
	}
	if err := reportPodIPs(p, set); err != nil {
		t.Fatal(err)
	}
	nodes.check(t, ns)
	if got := addrsOf(t, waitInstances(t, ns, p.Name, 1, estuaryv1.IPInstanceBound)); !slices.Equal(got, set) {
		t.Errorf("pod is recorded with %v, want %v, the one its node set up", got, set)
	}
}

// logged: the manager holds the record named name for a pod (it adopted
// it), so its next pass has seen both addresses.
func logged(r *Reconciler, name string) error {
	for _, key := range r.held.keys() {
		if r.held.holds(key, name) {
			return nil
		}
	}
	return fmt.Errorf("no pod holds record %s yet", name)
}

// A namespace being deleted releases what its workloads kept and what was
// reserved in it. Before, kept addresses outlived their namespace until
// they expired.
func TestDeletedNamespaceReleasesWhatItKept(t *testing.T) {
	overlay(t, "ov-lb-nsdel", "10.76.0.0/24")
	ns := newNamespace(t, nil)
	startManager(t)
	keptAddress(t, ns, "ov-lb-nsdel")
	reserve(t, ns, "ov-lb-nsdel", "10.76.0.200/24", "Deployment", "vip")
	waitUsed(t, "ov-lb-nsdel-0", 2)
	if err := k8s.Delete(bg(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "every record of the namespace released", func() error {
		if items := allInstances(t, ns); len(items) > 0 {
			var names []string
			for _, ipi := range items {
				names = append(names, ipi.Name+" "+string(ipi.Status.Phase))
			}
			return fmt.Errorf("still recorded: %s", strings.Join(names, ", "))
		}
		return nil
	})
	waitUsed(t, "ov-lb-nsdel-0", 0)
}

// poolDuringHandOver wraps a client so that, while the update binding a
// kept address to pod is on its way to the API server, the workload's pool
// is reconciled once, to its end (run), with a cache that still shows the
// address kept.
type poolDuringHandOver struct {
	pod  string
	run  func()
	done atomic.Bool
}

func (p *poolDuringHandOver) wrap(c client.WithWatch) client.Client {
	return interceptor.NewClient(c, interceptor.Funcs{
		Update: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.UpdateOption) error {
			ipi, ok := obj.(*estuaryv1.IPInstance)
			if ok && ipi.Status.Phase == estuaryv1.IPInstanceBound && ipi.Spec.Binding.PodName == p.pod && p.done.CompareAndSwap(false, true) {
				p.run()
			}
			return c.Update(ctx, obj, opts...)
		},
	})
}

// A workload's pool reconciled while a kept address is being handed to
// one of its pods does not take the address back into its list (its cache
// still shows it kept): the pod has it, and the next pod of the workload
// is given a new address at once. Before, the pool listed the address
// again, and every later pod of the workload picked it, found it was the
// first pod's, and tried again, until an audit came by.
func TestPoolReconciledDuringAHandOverDoesNotTakeItBack(t *testing.T) {
	overlay(t, "ov-inhand", "10.82.0.0/24")
	ns := newNamespace(t, nil)
	var c *controllers
	hook := &poolDuringHandOver{pod: "web-b-0"}
	hook.run = func() {
		req := workload.Ref{Namespace: ns, Kind: "Deployment", Name: "web"}
		if _, err := c.pools.Reconcile(bg(), req); err != nil {
			t.Errorf("reconcile the pool during the hand-over: %v", err)
		}
	}
	c, _ = startControllers(t, testManager{rc: cfg, client: hook.wrap})
	r := c.pods
	eventually(t, "allocator rebuilt", func() error { return r.Ready() })
	kept, next := keptAddress(t, ns, "ov-inhand")

	retain := annotated(estuaryv1.AnnotationIPRetain, "true")
	p := newPod(t, ns, "web-b-0", next, retain, onNetwork("ov-inhand"))
	if got := addrsOf(t, waitInstances(t, ns, p.Name, 1, estuaryv1.IPInstanceBound)); !slices.Equal(got, []netip.Addr{kept}) {
		t.Fatalf("P is recorded with %v, want the kept %s", got, kept)
	}
	if !hook.done.Load() {
		t.Fatal("the pool was not reconciled during the hand-over: the test proves nothing")
	}
	pool := ns + "/Deployment/web"
	if _, ok := r.held.find(pool, estuaryv1.InstanceName(kept)); ok {
		t.Errorf("the pool lists %s again while pod P holds it", kept)
	}
	q := newPod(t, ns, "web-b-1", next, retain, onNetwork("ov-inhand"))
	got := addrsOf(t, waitInstances(t, ns, q.Name, 1, estuaryv1.IPInstanceBound))
	if slices.Contains(got, kept) {
		t.Errorf("Q is recorded with %v, P's address", got)
	}
	requireUnique(t, allInstances(t, ns))
}
