package ops

import (
	"testing"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

// TestPolicyPodToNode: pod a is under an egress default-deny. Under
// PodToNodeAllow it reaches a listener on its node's own addresses (IPv4
// and IPv6) while its traffic to pod b stays dropped; under
// PodToNodePolicy the node's listener is dropped too. Each change of the
// value recreates the table (delete and create, one batch), and the read
// back recognises the shape, so writing it again changes nothing.
func TestPolicyPodToNode(t *testing.T) {
	n := newPolicyNode(t, 2)
	a, b := n.pods[0], n.pods[1]
	listenTCP(t, n.host, nodeV4, 9000)
	listenTCP(t, n.host, nodeV6, 9000)
	listenTCP(t, b.ns, b.v4, 9000)
	m := policy.Node{Endpoints: []policy.Endpoint{{HostVeth: a.veth, Egress: policy.Direction{Isolated: true}}}}
	for i, step := range []struct {
		value  policy.PodToNode
		toNode bool
	}{
		{policy.PodToNodeAllow, true},
		{policy.PodToNodePolicy, false},
		{policy.PodToNodeAllow, true},
	} {
		rs, err := policy.Compile(m)
		if err != nil {
			t.Fatal(err)
		}
		rs.Skeleton = policy.Skeleton{PodToNode: step.value}
		o, err := n.pol.Ensure(rs)
		if err != nil {
			t.Fatalf("pod-to-node %s: %v", step.value, err)
		}
		if !o.Create || o.Delete != (i > 0) || o.Skeleton != rs.Skeleton {
			t.Errorf("pod-to-node %s: want the table (re)created in that shape, got:\n%s", step.value, o)
		}
		if o, err := n.pol.Ensure(rs); err != nil || !o.Empty() {
			t.Errorf("pod-to-node %s written again: %v\n%s", step.value, err, o)
		}
		if have, err := n.pol.Read(); err != nil || !have.Skeleton || have.Shape != rs.Skeleton {
			t.Errorf("pod-to-node %s read back: skeleton %v shape %+v, %v", step.value, have.Skeleton, have.Shape, err)
		}
		expectTCP(t, "pod-to-node "+step.value.String()+": to the node", a.ns, nodeV4, 9000, step.toNode)
		expectTCP(t, "pod-to-node "+step.value.String()+": to the node, IPv6", a.ns, nodeV6, 9000, step.toNode)
		expectTCP(t, "pod-to-node "+step.value.String()+": to another pod", a.ns, b.v4, 9000, false)
	}
}
