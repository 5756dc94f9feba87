package ipwait

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

var (
	k8s    client.Client
	view   cache.Cache // the waiter's cache
	waiter *Waiter
)

func TestMain(m *testing.M) {
	opts := testenv.Options{AddToScheme: []func(*runtime.Scheme) error{eventsv1.AddToScheme}}
	os.Exit(testenv.Main(m, opts, setup))
}

// setup starts the daemon's view of the records (every node's) and the
// waiter, which serves node-a's.
func setup(cfg *rest.Config, c client.Client) (func(), error) {
	k8s = c
	var err error
	view, err = cache.New(cfg, cache.Options{Scheme: c.Scheme()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	if waiter, err = New(ctx, view, "node-a", nil); err != nil {
		return cancel, err
	}
	go func() { _ = view.Start(ctx) }()
	if !view.WaitForCacheSync(ctx) {
		return cancel, errors.New("cache did not sync")
	}
	return cancel, nil
}

// record creates an IPInstance for pod ns/pod, one of count addresses, in
// network n.
func record(t *testing.T, ns, pod, uid, node, ip string, count int, phase estuaryv1.IPInstancePhase) *estuaryv1.IPInstance {
	t.Helper()
	return recordIn(t, "n", ns, pod, uid, node, ip, count, phase)
}

// recordIn creates an IPInstance for pod ns/pod in network.
func recordIn(t *testing.T, network, ns, pod, uid, node, ip string, count int, phase estuaryv1.IPInstancePhase) *estuaryv1.IPInstance {
	t.Helper()
	return create(t, instance(network, ns, pod, uid, node, ip, count, phase))
}

// instance is the IPInstance recordIn creates.
func instance(network, ns, pod, uid, node, ip string, count int, phase estuaryv1.IPInstancePhase) *estuaryv1.IPInstance {
	p := netip.MustParsePrefix(ip)
	v := int32(4)
	if p.Addr().Is6() {
		v = 6
	}
	ipi := &estuaryv1.IPInstance{
		ObjectMeta: metav1.ObjectMeta{
			Name:        estuaryv1.InstanceName(p.Addr()),
			Labels:      map[string]string{estuaryv1.LabelNamespace: ns, estuaryv1.LabelPod: pod, estuaryv1.LabelNode: node},
			Annotations: map[string]string{estuaryv1.AnnotationAddresses: fmt.Sprint(count)},
		},
		Spec: estuaryv1.IPInstanceSpec{
			Network: network, Subnet: "s",
			Address: estuaryv1.InstanceAddress{IP: ip, Version: v},
			Binding: estuaryv1.Binding{Namespace: ns, Owner: estuaryv1.OwnerReference{Kind: "Pod", Name: pod, UID: uid}, PodName: pod, PodUID: uid, NodeName: node},
		},
		Status: estuaryv1.IPInstanceStatus{Phase: phase},
	}
	return ipi
}

// create creates ipi, deleted when the test ends.
func create(t *testing.T, ipi *estuaryv1.IPInstance) *estuaryv1.IPInstance {
	t.Helper()
	if err := k8s.Create(context.Background(), ipi); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), ipi) })
	return ipi
}

type result struct {
	addrs []string
	err   error
}

// waitAsync starts a Wait bounded by d and returns its result channel.
func waitAsync(ns, pod, uid string, d time.Duration) <-chan result {
	out := make(chan result, 1)
	w := waiter
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		as, err := w.Wait(ctx, ns, pod, uid)
		var s []string
		for _, a := range as {
			s = append(s, a.IP.String())
		}
		out <- result{s, err}
	}()
	return out
}

func TestWaitTimesOutNamingThePod(t *testing.T) {
	r := <-waitAsync("default", "ghost", "u0", 300*time.Millisecond)
	if r.err == nil || !errors.Is(r.err, context.DeadlineExceeded) || !strings.Contains(r.err.Error(), "pod default/ghost") {
		t.Fatalf("got %v %v; want a deadline error naming pod default/ghost", r.addrs, r.err)
	}
}

func TestWaitReturnsOnlyWhenEveryAddressIsRecorded(t *testing.T) {
	ch := waitAsync("default", "dual", "u1", 20*time.Second)
	record(t, "default", "dual", "u1", "node-a", "10.9.0.5/24", 2, estuaryv1.IPInstanceBound)
	select {
	case r := <-ch:
		t.Fatalf("returned %v, %v with one of two addresses recorded", r.addrs, r.err)
	case <-time.After(500 * time.Millisecond):
	}
	record(t, "default", "dual", "u1", "node-a", "fd00:9::5/64", 2, estuaryv1.IPInstanceBound)
	r := <-ch
	if r.err != nil || strings.Join(r.addrs, ",") != "10.9.0.5/24,fd00:9::5/64" {
		t.Fatalf("got %v %v; want both addresses, IPv4 first", r.addrs, r.err)
	}
}

// A Bound record without an address count does not complete an ADD: the
// manager writes the count with every binding, so without it the node
// cannot know how many families to wait for. Once the count is there the
// ADD returns.
func TestWaitNeedsTheAddressCount(t *testing.T) {
	ch := waitAsync("default", "nocount", "u5", 20*time.Second)
	ipi := instance("n", "default", "nocount", "u5", "node-a", "10.9.0.11/24", 1, estuaryv1.IPInstanceBound)
	delete(ipi.Annotations, estuaryv1.AnnotationAddresses)
	ipi = create(t, ipi)
	select {
	case r := <-ch:
		t.Fatalf("returned %v, %v for a record without an address count", r.addrs, r.err)
	case <-time.After(500 * time.Millisecond):
	}
	ipi.Annotations = map[string]string{estuaryv1.AnnotationAddresses: "1"}
	if err := k8s.Update(context.Background(), ipi); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.err != nil || strings.Join(r.addrs, ",") != "10.9.0.11/24" {
		t.Fatalf("got %v %v; want 10.9.0.11/24", r.addrs, r.err)
	}
}

// Of two Bound records of one family (a split brain the manager settles by
// the address the pod reports), the ADD takes the lower address, and only
// one per family.
func TestWaitTakesOneAddressPerFamily(t *testing.T) {
	record(t, "default", "twice", "u6", "node-a", "10.9.0.21/24", 2, estuaryv1.IPInstanceBound)
	record(t, "default", "twice", "u6", "node-a", "10.9.0.20/24", 1, estuaryv1.IPInstanceBound)
	ch := waitAsync("default", "twice", "u6", 500*time.Millisecond)
	if r := <-ch; r.err == nil {
		t.Fatalf("returned %v with one family of the two the records count", r.addrs)
	}
	record(t, "default", "twice", "u6", "node-a", "fd00:9::20/64", 2, estuaryv1.IPInstanceBound)
	r := <-waitAsync("default", "twice", "u6", 20*time.Second)
	if r.err != nil || strings.Join(r.addrs, ",") != "10.9.0.20/24,fd00:9::20/64" {
		t.Fatalf("got %v %v; want the lower IPv4 address and the IPv6 one", r.addrs, r.err)
	}
}

func TestWaitIgnoresRecordsOfOtherPodsAndNodes(t *testing.T) {
	old := record(t, "default", "web-0", "old-uid", "node-a", "10.9.0.7/24", 1, estuaryv1.IPInstanceBound)
	record(t, "default", "elsewhere", "u3", "node-b", "10.9.0.8/24", 1, estuaryv1.IPInstanceBound)
	ch := waitAsync("default", "web-0", "new-uid", 20*time.Second)
	other := waitAsync("default", "elsewhere", "u3", 500*time.Millisecond)
	if r := <-other; r.err == nil {
		t.Errorf("a record on another node was visible: %v", r.addrs)
	}
	select {
	case r := <-ch:
		t.Fatalf("returned %v, %v for a record bound to an earlier pod", r.addrs, r.err)
	case <-time.After(500 * time.Millisecond):
	}
	// The manager rebinds the retained address to the new pod.
	old.Spec.Binding.PodUID = "new-uid"
	if err := k8s.Update(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	if r := <-ch; r.err != nil || strings.Join(r.addrs, ",") != "10.9.0.7/24" {
		t.Fatalf("got %v %v after rebind; want 10.9.0.7/24", r.addrs, r.err)
	}
}

func TestWaitSkipsRetainedRecords(t *testing.T) {
	record(t, "default", "db-1", "u4", "node-a", "10.9.0.9/24", 1, estuaryv1.IPInstanceRetained)
	if r := <-waitAsync("default", "db-1", "u4", 500*time.Millisecond); r.err == nil {
		t.Fatalf("a Retained record was handed out: %v", r.addrs)
	}
}

func managerEvent(t *testing.T, name, pod, uid, reason, note string, at time.Time, controller string) {
	t.Helper()
	e := &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Namespace: "default", Name: name},
		EventTime:           metav1.NewMicroTime(at),
		ReportingController: controller, ReportingInstance: controller + "-1",
		Action: "Allocate", Reason: reason, Note: note, Type: "Warning",
		Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod, UID: types.UID(uid)},
	}
	if err := k8s.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), e) })
}

func TestTimeoutNamesTheManagersLastEvent(t *testing.T) {
	now := time.Now()
	managerEvent(t, "e1", "starved", "u9", "AllocationFailed", "subnet s: old news", now.Add(-time.Minute), ManagerController)
	managerEvent(t, "e2", "starved", "u9", "AllocationFailed", "subnet s: no free address", now, ManagerController)
	managerEvent(t, "e3", "starved", "u9", "Pulled", "someone else's", now.Add(time.Minute), "kubelet")
	managerEvent(t, "e4", "starved", "other-uid", "AllocationFailed", "an earlier pod's", now.Add(time.Minute), ManagerController)
	waiter.SetDiagnose(ManagerEvents(k8s))
	t.Cleanup(func() { waiter.SetDiagnose(nil) })

	r := <-waitAsync("default", "starved", "u9", 300*time.Millisecond)
	want := "estuary-manager's last event for it: Warning AllocationFailed: subnet s: no free address"
	if r.err == nil || !strings.Contains(r.err.Error(), want) || !errors.Is(r.err, context.DeadlineExceeded) {
		t.Fatalf("error = %v; want one containing %q", r.err, want)
	}
	r = <-waitAsync("default", "quiet", "u10", 300*time.Millisecond)
	if r.err == nil || !strings.Contains(r.err.Error(), "estuary-manager recorded no event for it") {
		t.Fatalf("error = %v; want one saying the manager recorded nothing", r.err)
	}
}

// Addresses of an Underlay network come back marked Underlay (the pod gets
// the uplink's MTU); those of a network that is not Underlay, or not in the
// cache, do not.
func TestWaitMarksUnderlayAddresses(t *testing.T) {
	n := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "rack9"}, Spec: estuaryv1.NetworkSpec{
		Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeVLAN, NetID: ptr.To[int64](0),
		NodeSelector: map[string]string{"rack": "rack9"},
	}}
	if err := k8s.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
	testenv.Eventually(t, "network rack9 in the waiter's cache", 10*time.Second, func() error {
		return view.Get(context.Background(), client.ObjectKey{Name: "rack9"}, &estuaryv1.Network{})
	})
	// A VLAN address makes the waiter read its node (for the network's
	// domain); node-a is outside rack9's.
	ensureNode(t, "node-a", nil)
	recordIn(t, "rack9", "default", "under-0", "uu0", "node-a", "10.77.9.5/24", 1, estuaryv1.IPInstanceBound)
	record(t, "default", "over-0", "uo0", "node-a", "10.9.0.9/24", 1, estuaryv1.IPInstanceBound)
	for _, c := range []struct {
		pod, uid string
		want     bool
	}{{"under-0", "uu0", true}, {"over-0", "uo0", false}} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		as, err := waiter.Wait(ctx, "default", c.pod, c.uid)
		cancel()
		if err != nil || len(as) != 1 {
			t.Fatalf("%s: got %v, %v; want one address", c.pod, as, err)
		}
		if as[0].Underlay != c.want {
			t.Errorf("%s: Underlay = %v, want %v", c.pod, as[0].Underlay, c.want)
		}
	}
}

// ensureNode makes node name exist with labels, in the API and in the
// waiter's cache, until the test ends.
func ensureNode(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := k8s.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), n) })
	testenv.Eventually(t, "node "+name+" in the waiter's cache", 10*time.Second, func() error {
		var got corev1.Node
		if err := view.Get(context.Background(), client.ObjectKey{Name: name}, &got); err != nil {
			return err
		}
		if len(got.Labels) != len(labels) {
			return fmt.Errorf("labels %v, want %v", got.Labels, labels)
		}
		return nil
	})
}

// createAll creates objs, removed when the test ends, and waits until the
// waiter's cache has each.
func createAll(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := k8s.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), o) })
		testenv.Eventually(t, o.GetName()+" in the waiter's cache", 10*time.Second, func() error {
			return view.Get(context.Background(), client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))
		})
	}
}

// An address on a VLAN network whose domain holds the node comes back with
// its network, subnet and segment (the subnet's own VLAN id, else the
// network's); BGP and overlay addresses, and VLAN addresses outside the
// node's domains, have no segment. A VLAN address on a node missing from
// the cache fails the wait, naming the node.
func TestWaitResolvesVLANSegments(t *testing.T) {
	seg := map[string]string{"seg": "s1"}
	vlan := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "seg-vlan"}, Spec: estuaryv1.NetworkSpec{
		Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeVLAN, NetID: ptr.To[int64](0), NodeSelector: seg}}
	elsewhere := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "seg-other"}, Spec: estuaryv1.NetworkSpec{
		Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeVLAN, NetID: ptr.To[int64](0),
		NodeSelector: map[string]string{"seg": "s2"}}}
	fabric := &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "seg-bgp"}, Spec: estuaryv1.NetworkSpec{
		Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeBGP, NetID: ptr.To[int64](65010), NodeSelector: seg,
		BGPPeers: []estuaryv1.BGPPeer{{Address: "10.77.0.1", ASN: 65000}}}}
	tagged := &estuaryv1.Subnet{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: estuaryv1.SubnetSpec{
		Network: "seg-vlan", NetID: ptr.To[int64](10), Range: estuaryv1.AddressRange{Version: 4, CIDR: "192.168.10.0/24"}}}
	createAll(t, vlan, elsewhere, fabric, tagged)
	ensureNode(t, "node-a", seg)
	pods := map[string]string{"seg-vlan": "seg-v", "seg-bgp": "seg-b", "seg-other": "seg-o"}
	recordIn(t, "seg-vlan", "default", "seg-v", "usv", "node-a", "192.168.10.5/24", 1, estuaryv1.IPInstanceBound)
	recordIn(t, "seg-bgp", "default", "seg-b", "usb", "node-a", "10.90.0.9/24", 1, estuaryv1.IPInstanceBound)
	recordIn(t, "seg-other", "default", "seg-o", "uso", "node-a", "192.168.20.5/24", 1, estuaryv1.IPInstanceBound)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for network, pod := range pods {
		as, err := waiter.Wait(ctx, "default", pod, "us"+pod[len(pod)-1:])
		if err != nil || len(as) != 1 {
			t.Fatalf("Wait for %s = %v, %v; want its address", pod, as, err)
		}
		a := as[0]
		want := (*Segment)(nil)
		if network == "seg-vlan" {
			want = &Segment{VLAN: 10}
		}
		if a.Network != network || (a.Segment == nil) != (want == nil) || (want != nil && *a.Segment != *want) {
			t.Errorf("%s (network %s): segment %+v, want network %s segment %+v", a.IP, a.Network, a.Segment, network, want)
		}
		if a.Subnet != "s" || !a.Underlay {
			t.Errorf("%s: subnet %q underlay %v, want subnet s, underlay", a.IP, a.Subnet, a.Underlay)
		}
	}

	ghost, err := New(ctx, view, "ghost", nil)
	if err != nil {
		t.Fatal(err)
	}
	recordIn(t, "seg-bgp", "default", "seg-1", "us1", "ghost", "10.90.0.10/24", 1, estuaryv1.IPInstanceBound)
	if as, err := ghost.Wait(ctx, "default", "seg-1", "us1"); err != nil || len(as) != 1 || as[0].Segment != nil {
		t.Errorf("node missing from the cache, no VLAN address: Wait = %+v, %v; want the address", as, err)
	}
	recordIn(t, "seg-vlan", "default", "seg-2", "us2", "ghost", "192.168.10.6/24", 1, estuaryv1.IPInstanceBound)
	if _, err := ghost.Wait(ctx, "default", "seg-2", "us2"); err == nil || !strings.Contains(err.Error(), "node ghost") {
		t.Errorf("node missing from the cache, a VLAN address: Wait = %v, want an error naming node ghost", err)
	}
}
