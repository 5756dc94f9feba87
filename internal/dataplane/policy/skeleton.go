package policy

import "fmt"

// PodToNode says how the table judges what a local pod sends its own node
// (the input hook: the node's addresses, and host-network pods on it).
type PodToNode uint8

const (
	// PodToNodeAllow admits it whatever the pod's egress policy says, as
	// Kubernetes specifies ("traffic to and from the node where a Pod is
	// running is always allowed"): the input chain does not consult the
	// egress map, so node-local DNS caches and host agents keep working
	// under an egress default-deny. The zero value.
	PodToNodeAllow PodToNode = iota
	// PodToNodePolicy sends it through the pod's egress chain, like any
	// other destination: a pod's egress policy covers its node too.
	PodToNodePolicy
)

// PodToNodeValues are the names ParsePodToNode takes, in order.
var PodToNodeValues = []string{"allow", "policy"}

// String is the value's name (the daemon flag's and chart value's).
func (p PodToNode) String() string {
	if int(p) < len(PodToNodeValues) {
		return PodToNodeValues[p]
	}
	return fmt.Sprintf("PodToNode(%d)", uint8(p))
}

// ParsePodToNode reads a name of PodToNodeValues.
func ParsePodToNode(s string) (PodToNode, error) {
	for i, v := range PodToNodeValues {
		if s == v {
			return PodToNode(i), nil // #nosec G115 -- i indexes a two-element list
		}
	}
	return 0, fmt.Errorf("%q is neither allow nor policy", s)
}

// Skeleton chooses among the fixed shapes of the table's base chains and
// verdict maps, which the ops layer writes whole. Diff recreates a table
// whose skeleton is another shape, in the same single batch as the rest.
type Skeleton struct {
	PodToNode PodToNode
}

// Skeletons lists every shape, for the read-back to recognise the one in
// the kernel.
func Skeletons() []Skeleton {
	return []Skeleton{{PodToNode: PodToNodeAllow}, {PodToNode: PodToNodePolicy}}
}
