package bgpstatus

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/netmodel"
)

// Reasons of the BGPPeersEstablished condition.
const (
	// ReasonEstablished: every node of the domain has a session up.
	ReasonEstablished = "AllNodesEstablished"
	// ReasonNotEstablished: some node of the domain has no session up.
	ReasonNotEstablished = "NodesWithoutSession"
	// ReasonNoNodes: no node is in the network's domain.
	ReasonNoNodes = "NoNodes"
)

// maxListed is how many nodes the False message names; it counts the rest.
const maxListed = 20

// DecodePeers reads a Node's estuaryv1.AnnotationBGPPeers; a missing
// annotation gives an empty map.
func DecodePeers(node *corev1.Node) (map[string][]estuaryv1.NodeBGPPeer, error) {
	v, ok := node.Annotations[estuaryv1.AnnotationBGPPeers]
	if !ok {
		return map[string][]estuaryv1.NodeBGPPeer{}, nil
	}
	out, err := netmodel.ParseBGPPeers(v)
	if err != nil {
		return nil, fmt.Errorf("node %s: annotation %s: %w", node.Name, estuaryv1.AnnotationBGPPeers, err)
	}
	return out, nil
}

// Condition computes the BGPPeersEstablished condition of BGP network n
// over the cluster's nodes.
func Condition(n *estuaryv1.Network, nodes []corev1.Node) metav1.Condition {
	c := metav1.Condition{Type: estuaryv1.ConditionBGPPeersEstablished, ObservedGeneration: n.Generation}
	var domain, missing []string
	for i := range nodes {
		node := &nodes[i]
		if !netmodel.Attached(n, node.Labels) {
			continue
		}
		domain = append(domain, node.Name)
		if why := nodeProblem(node, n.Name); why != "" {
			missing = append(missing, node.Name+": "+why)
		}
	}
	switch {
	case len(domain) == 0:
		c.Status, c.Reason = metav1.ConditionFalse, ReasonNoNodes
		c.Message = "no node is in the network's domain (spec.nodeSelector matches none)"
	case len(missing) == 0:
		c.Status, c.Reason = metav1.ConditionTrue, ReasonEstablished
		c.Message = fmt.Sprintf("each of the %d nodes of the domain has an Established BGP session", len(domain))
	default:
		slices.Sort(missing)
		c.Status, c.Reason = metav1.ConditionFalse, ReasonNotEstablished
		listed := missing[:min(len(missing), maxListed)]
		c.Message = fmt.Sprintf("%d of the %d nodes of the domain have no Established BGP session: %s",
			len(missing), len(domain), strings.Join(listed, "; "))
		if more := len(missing) - len(listed); more > 0 {
			c.Message += fmt.Sprintf("; and %d more", more)
		}
	}
	return c
}

// nodeProblem says why node has no Established session in network, or ""
// when it has one.
func nodeProblem(node *corev1.Node, network string) string {
	nets, err := DecodePeers(node)
	if err != nil {
		return fmt.Sprintf("session states unreadable (%v)", err)
	}
	peers, ok := nets[network]
	if !ok {
		return "no session state published for this network (its daemon is not running or has not started the network's speaker)"
	}
	if len(peers) == 0 {
		return "its speaker has no peer configured"
	}
	parts := make([]string, 0, len(peers))
	for _, p := range peers {
		if p.State == estuaryv1.BGPStateEstablished {
			return ""
		}
		parts = append(parts, fmt.Sprintf("peer %s (AS %d) %s", p.Address, p.ASN, p.State))
	}
	return strings.Join(parts, ", ")
}
