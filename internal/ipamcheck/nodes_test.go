package ipamcheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	endpointsv1 "github.com/estuary-cni/estuary/api/endpoints/v1"
	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// on schedules p to node.
func on(node string, p corev1.Pod) corev1.Pod {
	p.Spec.NodeName = node
	return p
}

// endpoint is what a daemon records for pod ns/name (uid) with ips.
func endpoint(ns, name, uid, container string, ips ...string) endpointsv1.Endpoint {
	return endpointsv1.Endpoint{PodNamespace: ns, PodName: name, PodUID: uid, ContainerID: container, IfName: "eth0", IPs: ips, Created: old.Time}
}

func withNodes(s Snapshot, nodes map[string]NodeRead) Snapshot {
	s.Nodes = nodes
	return s
}

// nodeKinds lists "kind address pod node" of the findings.
func nodeKinds(r Report) string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, strings.Join([]string{string(f.Kind), f.Address, f.Pod, f.Node}, " "))
	}
	return strings.Join(out, "; ")
}

func TestNodesAgreeingWithRecordsHaveNoFindings(t *testing.T) {
	r := Check(withNodes(snapshot(
		[]estuaryv1.IPInstance{
			record("10.0.0.2/24", "s4", "a", "web", "u1", estuaryv1.IPInstanceBound),
			record("10.0.0.3/24", "s4", "a", "db", "u2", estuaryv1.IPInstanceBound),
		},
		[]corev1.Pod{on("n1", pod("a", "web", "u1", "10.0.0.2")), on("n2", pod("a", "db", "u2", "10.0.0.3"))},
		subnet("s4", "10.0.0.0/24", 2)),
		map[string]NodeRead{
			"n1": {Endpoints: []endpointsv1.Endpoint{endpoint("a", "web", "u1", "c1", "10.0.0.2/32")}},
			"n2": {Endpoints: []endpointsv1.Endpoint{endpoint("a", "db", "u2", "c2", "10.0.0.3/24")}},
		}))
	if len(r.Findings) != 0 {
		t.Fatalf("findings when every node plumbed what is recorded: %s", nodeKinds(r))
	}
	if r.Nodes != 2 || r.Endpoints != 2 {
		t.Errorf("report counts %d nodes %d endpoints, want 2 and 2", r.Nodes, r.Endpoints)
	}
}

// An endpoint whose address has no record, or whose record is another
// pod's (by name or UID) or a reservation no pod holds, is plumbed without
// or against its record.
func TestUnrecordedEndpointIsFound(t *testing.T) {
	reserved := record("10.0.0.6/24", "s4", "a", "", "", estuaryv1.IPInstanceReserved)
	r := Check(withNodes(snapshot(
		[]estuaryv1.IPInstance{
			record("10.0.0.2/24", "s4", "a", "web", "u1", estuaryv1.IPInstanceBound),
			record("10.0.0.3/24", "s4", "a", "other", "u9", estuaryv1.IPInstanceBound),
			record("10.0.0.4/24", "s4", "a", "web", "u0", estuaryv1.IPInstanceBound),
			reserved,
		},
		[]corev1.Pod{on("n1", pod("a", "web", "u1", "10.0.0.2")), on("n1", pod("a", "other", "u9", "10.0.0.3"))},
		subnet("s4", "10.0.0.0/24", 4)),
		map[string]NodeRead{"n1": {Endpoints: []endpointsv1.Endpoint{
			endpoint("a", "web", "u1", "c1", "10.0.0.2/32", "10.0.0.5/32"),
			endpoint("a", "web", "u1", "c1b", "10.0.0.3/32", "10.0.0.4/32", "10.0.0.6/32"),
			endpoint("a", "other", "u9", "c2", "10.0.0.3/32"),
		}}}))
	want := "Leaked 10.0.0.4/24 a/web ; UnrecordedEndpoint 10.0.0.3 a/web n1; UnrecordedEndpoint 10.0.0.4 a/web n1; " +
		"UnrecordedEndpoint 10.0.0.5 a/web n1; UnrecordedEndpoint 10.0.0.6 a/web n1"
	if got := nodeKinds(r); got != want {
		t.Fatalf("findings:\n got  %s\n want %s", got, want)
	}
	for _, f := range r.Findings[1:] {
		if f.Endpoint == "" || !strings.Contains(f.Detail, "node n1") || !strings.Contains(f.Detail, f.Endpoint) {
			t.Errorf("finding does not name its node and endpoint: %+v", f)
		}
	}
	if f := r.Findings[1]; f.Record != "10.0.0.3" || !strings.Contains(f.Detail, "recorded for pod a/other") {
		t.Errorf("finding about another pod's address does not name its record: %+v", f)
	}
	if f := r.Findings[3]; f.Record != "" || !strings.Contains(f.Detail, "has no record") {
		t.Errorf("finding about an address without record: %+v", f)
	}
}

// A Bound record of a running pod whose node has no endpoint with the
// address for it is a dark pod, once pod and record are older than the
// grace; a pod on a node that was not read, or not running, is not judged.
func TestDarkPodIsFound(t *testing.T) {
	young := on("n1", pod("a", "fresh", "u3", "10.0.0.4"))
	young.CreationTimestamp = metav1.NewTime(now.Add(-10 * time.Second))
	pending := on("n1", pod("a", "pending", "u5", "10.0.0.7"))
	pending.Status.Phase = corev1.PodPending
	r := Check(withNodes(snapshot(
		[]estuaryv1.IPInstance{
			record("10.0.0.2/24", "s4", "a", "web", "u1", estuaryv1.IPInstanceBound),
			record("10.0.0.3/24", "s4", "a", "db", "u2", estuaryv1.IPInstanceBound),
			record("10.0.0.4/24", "s4", "a", "fresh", "u3", estuaryv1.IPInstanceBound),
			record("10.0.0.5/24", "s4", "a", "far", "u4", estuaryv1.IPInstanceBound),
			record("10.0.0.7/24", "s4", "a", "pending", "u5", estuaryv1.IPInstanceBound),
		},
		[]corev1.Pod{
			on("n1", pod("a", "web", "u1", "10.0.0.2")),
			on("n1", pod("a", "db", "u2", "10.0.0.3")),
			young,
			on("n3", pod("a", "far", "u4", "10.0.0.5")),
			pending,
		},
		subnet("s4", "10.0.0.0/24", 5)),
		map[string]NodeRead{"n1": {Endpoints: []endpointsv1.Endpoint{
			endpoint("a", "web", "u1", "c1", "10.0.0.2/32"),
			endpoint("a", "db", "u-old", "c0", "10.0.0.3/32"),
		}}}))
	want := "DarkPod 10.0.0.3/24 a/db n1; StaleEndpoint 10.0.0.3 a/db n1"
	if got := nodeKinds(r); got != want {
		t.Fatalf("findings:\n got  %s\n want %s", got, want)
	}
	f := r.Findings[0]
	if f.Record != "10.0.0.3" || f.PodUID != "u2" || !strings.Contains(f.Detail, "recorded, not plumbed") {
		t.Errorf("dark pod finding: %+v", f)
	}
}

// An endpoint for a pod that does not exist, or for an earlier pod of the
// name, is stale; a young endpoint is not judged.
func TestStaleEndpointIsFound(t *testing.T) {
	fresh := endpoint("a", "new", "u7", "c3", "10.0.0.7/32")
	fresh.Created = now.Add(-10 * time.Second)
	r := Check(withNodes(snapshot(
		[]estuaryv1.IPInstance{record("10.0.0.2/24", "s4", "a", "web", "u1", estuaryv1.IPInstanceBound)},
		[]corev1.Pod{on("n1", pod("a", "web", "u1", "10.0.0.2"))},
		subnet("s4", "10.0.0.0/24", 1)),
		map[string]NodeRead{"n1": {Endpoints: []endpointsv1.Endpoint{
			endpoint("a", "web", "u1", "c1", "10.0.0.2/32"),
			endpoint("a", "gone", "u2", "c2", "10.0.0.3/32", "fd00::3/128"),
			endpoint("a", "web", "u0", "c0", "10.0.0.4/32"),
			fresh,
		}}}))
	want := "StaleEndpoint 10.0.0.3,fd00::3 a/gone n1; StaleEndpoint 10.0.0.4 a/web n1"
	if got := nodeKinds(r); got != want {
		t.Fatalf("findings:\n got  %s\n want %s", got, want)
	}
	if f := r.Findings[0]; f.Endpoint != "c2/eth0" || f.PodUID != "u2" || !strings.Contains(f.Detail, "does not exist") {
		t.Errorf("stale endpoint finding: %+v", f)
	}
	if f := r.Findings[1]; !strings.Contains(f.Detail, "is another pod now (uid u1)") {
		t.Errorf("stale endpoint of an earlier pod: %+v", f)
	}
}

// A node whose daemon cannot be read is a finding; a node without a
// daemon only when pods of the pod network are scheduled there.
func TestUnreadableNodeIsFound(t *testing.T) {
	host := on("n3", pod("kube-system", "proxy", "u9"))
	host.Spec.HostNetwork = true
	r := Check(withNodes(snapshot(
		[]estuaryv1.IPInstance{record("10.0.0.2/24", "s4", "a", "web", "u1", estuaryv1.IPInstanceBound)},
		[]corev1.Pod{on("n1", pod("a", "web", "u1", "10.0.0.2")), on("n2", pod("a", "db", "u2")), host},
		subnet("s4", "10.0.0.0/24", 1)),
		map[string]NodeRead{
			"n1": {Err: errors.New("exec in kube-system/estuary-daemon-x: connection refused")},
			"n2": {Err: fmt.Errorf("node n2: %w", ErrNoDaemon)},
			"n3": {Err: fmt.Errorf("node n3: %w", ErrNoDaemon)},
		}))
	if got := nodeKinds(r); got != "NodeUnreadable   n1; NodeUnreadable   n2" {
		t.Fatalf("findings: %s", got)
	}
	if d := r.Findings[0].Detail; d != "node n1: daemon endpoints unreadable: exec in kube-system/estuary-daemon-x: connection refused" {
		t.Errorf("detail: %q", d)
	}
	if d := r.Findings[1].Detail; !strings.Contains(d, "1 pods of the pod network") {
		t.Errorf("detail: %q", d)
	}
	if r.Nodes != 0 {
		t.Errorf("report counts %d nodes read, want 0", r.Nodes)
	}
}

// Without node reads the node pass is skipped: a running pod is not dark.
func TestNodePassSkippedWithoutNodes(t *testing.T) {
	r := Check(snapshot(
		[]estuaryv1.IPInstance{record("10.0.0.2/24", "s4", "a", "web", "u1", estuaryv1.IPInstanceBound)},
		[]corev1.Pod{on("n1", pod("a", "web", "u1", "10.0.0.2"))},
		subnet("s4", "10.0.0.0/24", 1)))
	if len(r.Findings) != 0 || r.Nodes != 0 {
		t.Fatalf("node pass ran without node reads: %s (nodes %d)", nodeKinds(r), r.Nodes)
	}
}

// fakeNodes serves endpoints per node and counts the reads; fail makes the
// given read of a node (1 = first) fail.
type fakeNodes struct {
	mu    sync.Mutex
	eps   map[string][]endpointsv1.Endpoint
	fail  map[string]int
	reads map[string]int
}

func (f *fakeNodes) Endpoints(_ context.Context, node string) ([]endpointsv1.Endpoint, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads[node]++
	if f.fail[node] == f.reads[node] {
		return nil, errors.New("daemon restarting")
	}
	return f.eps[node], nil
}

// CheckTwiceNodes reads every node a pod is scheduled to, in both reads; a
// stale endpoint seen twice is reported, and a node unreadable only in the
// first read is not.
func TestCheckTwiceReadsEveryNode(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), estuaryv1.AddToScheme(scheme)); err != nil {
		t.Fatal(err)
	}
	web := on("n1", pod("a", "web", "u1", "10.0.0.2"))
	daemon := on("n2", pod("kube-system", "estuary-daemon-b", "d2"))
	daemon.Spec.HostNetwork = true
	rec := record("10.0.0.2/24", "s4", "a", "web", "u1", estuaryv1.IPInstanceBound)
	sn := subnet("s4", "10.0.0.0/24", 1)
	k := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&web, &daemon, &rec, &sn).WithStatusSubresource(&sn).Build()
	nodes := &fakeNodes{reads: map[string]int{}, fail: map[string]int{"n1": 1}, eps: map[string][]endpointsv1.Endpoint{
		"n1": {endpoint("a", "web", "u1", "c1", "10.0.0.2/32")},
		"n2": {endpoint("a", "gone", "u2", "c2", "10.0.0.3/32")},
	}}
	r, err := CheckTwiceNodes(context.Background(), k, nodes, 0, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if got := nodeKinds(r); got != "StaleEndpoint 10.0.0.3 a/gone n2" {
		t.Errorf("findings: %s", got)
	}
	if nodes.reads["n1"] != 2 || nodes.reads["n2"] != 2 {
		t.Errorf("node reads %v, want each node read twice", nodes.reads)
	}
	if r.Nodes != 2 || r.Endpoints != 2 {
		t.Errorf("report counts %d nodes %d endpoints, want 2 and 2", r.Nodes, r.Endpoints)
	}
}

// A node the later read could not read is reported even when the first
// read could: its plumbing went unchecked.
func TestStableKeepsALaterUnreadableNode(t *testing.T) {
	stale := Finding{Kind: StaleEndpoint, Node: "n2", Endpoint: "c2/eth0", Pod: "a/gone", Detail: "first"}
	first := Report{Findings: []Finding{stale}}
	later := Report{Findings: []Finding{{Kind: NodeUnreadable, Node: "n2", Detail: "node n2: daemon endpoints unreadable: timeout"}}}
	if got := nodeKinds(Stable(first, later)); got != "NodeUnreadable   n2" {
		t.Errorf("stable findings: %s", got)
	}
}
