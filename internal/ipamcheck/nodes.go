package ipamcheck

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"

	endpointsv1 "github.com/estuary-cni/estuary/api/endpoints/v1"
	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// Kinds of node findings: what a node's daemon plumbed (its endpoint
// store) disagrees with the records and pods. repair releases nothing for
// them.
const (
	// UnrecordedEndpoint: a node plumbed an address that no record holds,
	// or whose record names another pod: the address may be handed out
	// again while this interface still answers for it.
	UnrecordedEndpoint Kind = "UnrecordedEndpoint"
	// DarkPod: a Bound record of a running pod whose node's daemon has no
	// endpoint with that address for it: recorded but not plumbed.
	DarkPod Kind = "DarkPod"
	// StaleEndpoint: a node keeps an endpoint for a pod that no longer
	// exists (no pod of its name, or one with another UID).
	StaleEndpoint Kind = "StaleEndpoint"
	// NodeUnreadable: a node's daemon endpoints could not be read, so its
	// plumbing was not checked.
	NodeUnreadable Kind = "NodeUnreadable"
)

// IsNodeKind reports whether k is a finding about a node's plumbing.
func IsNodeKind(k Kind) bool {
	switch k {
	case UnrecordedEndpoint, DarkPod, StaleEndpoint, NodeUnreadable:
		return true
	}
	return false
}

// ErrNoDaemon is returned (wrapped) by NodeEndpoints.Endpoints when no
// daemon runs on the node. It is a finding only on a node that runs pods of
// the pod network.
var ErrNoDaemon = errors.New("no daemon pod runs on the node")

// NodeEndpoints reads what one node's daemon plumbed.
type NodeEndpoints interface {
	Endpoints(ctx context.Context, node string) ([]endpointsv1.Endpoint, error)
}

// NodeRead is one node's endpoints, or why they could not be read.
type NodeRead struct {
	Endpoints []endpointsv1.Endpoint
	Err       error
}

// nodeReaders bounds how many nodes are read at once.
const nodeReaders = 8

// readNodes reads the endpoints of every node a pod of s is scheduled to
// (the daemons are such pods themselves).
func readNodes(ctx context.Context, n NodeEndpoints, s Snapshot) map[string]NodeRead {
	nodes := map[string]bool{}
	for i := range s.Pods {
		p := &s.Pods[i]
		if p.Spec.NodeName != "" && !finished(p) {
			nodes[p.Spec.NodeName] = true
		}
	}
	out := make(map[string]NodeRead, len(nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, nodeReaders)
	for node := range nodes {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			eps, err := n.Endpoints(ctx, node)
			mu.Lock()
			out[node] = NodeRead{Endpoints: eps, Err: err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func finished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// checkNodes compares every node's endpoints with the records and pods.
func checkNodes(s Snapshot, pods map[string]*corev1.Pod) []Finding {
	recorded := map[netip.Addr]*estuaryv1.IPInstance{}
	for i := range s.Records {
		if a, ok := addrOf(&s.Records[i]); ok {
			recorded[a] = &s.Records[i]
		}
	}
	var out []Finding
	for _, node := range slices.Sorted(func(yield func(string) bool) {
		for n := range s.Nodes {
			if !yield(n) {
				return
			}
		}
	}) {
		read := s.Nodes[node]
		if read.Err != nil {
			if f, ok := unreadable(node, read.Err, s.Pods); ok {
				out = append(out, f)
			}
			continue
		}
		for _, ep := range read.Endpoints {
			if young(s, ep.Created) {
				continue
			}
			out = append(out, checkEndpoint(node, ep, pods, recorded)...)
		}
	}
	return append(out, checkDark(s, pods)...)
}

// unreadable is the finding about a node whose endpoints could not be
// read. A node without a daemon is one only when pods of the pod network
// run there.
func unreadable(node string, err error, pods []corev1.Pod) (Finding, bool) {
	f := Finding{Kind: NodeUnreadable, Node: node, Detail: fmt.Sprintf("node %s: daemon endpoints unreadable: %v", node, err)}
	if !errors.Is(err, ErrNoDaemon) {
		return f, true
	}
	n := 0
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == node && !p.Spec.HostNetwork && !finished(p) {
			n++
		}
	}
	f.Detail += fmt.Sprintf(", yet %d pods of the pod network are scheduled there", n)
	return f, n > 0
}

// checkEndpoint finds an endpoint whose pod is gone, or whose addresses no
// record holds for its pod.
func checkEndpoint(node string, ep endpointsv1.Endpoint, pods map[string]*corev1.Pod, recorded map[netip.Addr]*estuaryv1.IPInstance) []Finding {
	base := Finding{Node: node, Endpoint: ep.Key(), Pod: ep.Pod(), PodUID: ep.PodUID}
	if ep.PodName != "" {
		if p := pods[ep.Pod()]; p == nil || (ep.PodUID != "" && string(p.UID) != ep.PodUID) {
			f := base
			f.Kind, f.Address = StaleEndpoint, joinAddrs(ep.Addrs())
			f.Detail = fmt.Sprintf("node %s: endpoint %s (%v) is plumbed for pod %s (uid %q), which %s; the daemon's node GC removes it once the pod has been gone for its --gc-grace",
				node, ep.Key(), ep.IPs, ep.Pod(), ep.PodUID, goneReason(p))
			return []Finding{f}
		}
	}
	var out []Finding
	for _, a := range ep.Addrs() {
		ipi := recorded[a]
		if ipi != nil && (ep.PodName == "" || recordIsFor(ipi, ep)) {
			continue
		}
		f := base
		f.Kind, f.Address = UnrecordedEndpoint, a.String()
		if ipi != nil {
			f.Record, f.RecordUID, f.Subnet = ipi.Name, string(ipi.UID), ipi.Spec.Subnet
		}
		f.Detail = fmt.Sprintf("node %s: endpoint %s plumbs %s for pod %s, but the address %s: it may be handed to another pod while this interface answers for it",
			node, ep.Key(), a, orNone(ep.Pod()), recordedFor(ipi))
		out = append(out, f)
	}
	return out
}

func joinAddrs(as []netip.Addr) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	return strings.Join(s, ",")
}

func goneReason(p *corev1.Pod) string {
	if p == nil {
		return "does not exist"
	}
	return fmt.Sprintf("is another pod now (uid %s)", p.UID)
}

func orNone(s string) string {
	if s == "" {
		return "(none named)"
	}
	return s
}

// recordIsFor reports whether a Bound record binds its address to the
// endpoint's pod.
func recordIsFor(ipi *estuaryv1.IPInstance, ep endpointsv1.Endpoint) bool {
	b := ipi.Spec.Binding
	return ipi.Status.Phase == estuaryv1.IPInstanceBound && b.Namespace == ep.PodNamespace && b.PodName == ep.PodName &&
		(b.PodUID == "" || ep.PodUID == "" || b.PodUID == ep.PodUID)
}

// checkDark finds Bound records of running pods whose node was read and
// has no endpoint with the address for the pod.
func checkDark(s Snapshot, pods map[string]*corev1.Pod) []Finding {
	var out []Finding
	for i := range s.Records {
		ipi := &s.Records[i]
		a, ok := addrOf(ipi)
		if !ok || ipi.Status.Phase != estuaryv1.IPInstanceBound || young(s, ipi.CreationTimestamp.Time) {
			continue
		}
		p := podOf(ipi, pods)
		if p == nil || (ipi.Spec.Binding.PodUID != "" && string(p.UID) != ipi.Spec.Binding.PodUID) ||
			p.Status.Phase != corev1.PodRunning || p.DeletionTimestamp != nil || young(s, p.CreationTimestamp.Time) {
			continue
		}
		read, ok := s.Nodes[p.Spec.NodeName]
		if !ok || read.Err != nil || plumbed(read.Endpoints, a, p) {
			continue
		}
		f := recordFinding(DarkPod, ipi, p, fmt.Sprintf("node %s: pod %s runs with %s (ipinstance %s) but the node's daemon has no endpoint with that address for it: recorded, not plumbed",
			p.Spec.NodeName, podKey(ipi), a, ipi.Name))
		f.Node = p.Spec.NodeName
		out = append(out, f)
	}
	return out
}

// plumbed reports whether an endpoint holds a for pod p (or for no named
// pod).
func plumbed(eps []endpointsv1.Endpoint, a netip.Addr, p *corev1.Pod) bool {
	for _, ep := range eps {
		if ep.PodName != "" && (ep.PodNamespace != p.Namespace || ep.PodName != p.Name) {
			continue
		}
		if ep.PodUID != "" && ep.PodUID != string(p.UID) {
			continue
		}
		if slices.Contains(ep.Addrs(), a) {
			return true
		}
	}
	return false
}
