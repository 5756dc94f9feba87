package bgpstatus

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

func fabric() *estuaryv1.Network {
	return &estuaryv1.Network{ObjectMeta: metav1.ObjectMeta{Name: "fabric", Generation: 3}, Spec: estuaryv1.NetworkSpec{
		Type: estuaryv1.NetworkTypeUnderlay, Mode: estuaryv1.NetworkModeBGP, NetID: ptr.To[int64](65010),
		NodeSelector: map[string]string{"bgp": "true"},
	}}
}

func bgpNode(name string, inDomain bool, annotation string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if inDomain {
		n.Labels["bgp"] = "true"
	}
	if annotation != "" {
		n.Annotations = map[string]string{estuaryv1.AnnotationBGPPeers: annotation}
	}
	return n
}

func TestCondition(t *testing.T) {
	up := `{"fabric":[{"address":"10.0.0.1","asn":65000,"state":"Active"},{"address":"10.0.0.2","asn":65000,"state":"Established"}]}`
	down := `{"fabric":[{"address":"10.0.0.1","asn":65000,"state":"Active"},{"address":"10.0.0.2","asn":65001,"state":"Idle"}],"other":[]}`
	cases := []struct {
		name     string
		nodes    []corev1.Node
		status   metav1.ConditionStatus
		reason   string
		contains []string
	}{
		{"no node in the domain", []corev1.Node{bgpNode("outside", false, down)},
			metav1.ConditionFalse, ReasonNoNodes, []string{"no node is in the network's domain"}},
		{"every node with a session up; nodes outside ignored", []corev1.Node{bgpNode("a", true, up), bgpNode("b", true, up), bgpNode("outside", false, "")},
			metav1.ConditionTrue, ReasonEstablished, []string{"each of the 2 nodes"}},
		{"nodes without a session named with their peers", []corev1.Node{bgpNode("a", true, up), bgpNode("c", true, down), bgpNode("b", true, "")},
			metav1.ConditionFalse, ReasonNotEstablished, []string{
				"2 of the 3 nodes of the domain have no Established BGP session: ",
				"b: no session state published for this network",
				"c: peer 10.0.0.1 (AS 65000) Active, peer 10.0.0.2 (AS 65001) Idle",
			}},
		{"a network missing from the annotation or without peers", []corev1.Node{bgpNode("a", true, `{"other":[]}`), bgpNode("b", true, `{"fabric":[]}`)},
			metav1.ConditionFalse, ReasonNotEstablished, []string{"a: no session state published", "b: its speaker has no peer configured"}},
		{"an unreadable annotation", []corev1.Node{bgpNode("a", true, `{"fabric":`)},
			metav1.ConditionFalse, ReasonNotEstablished, []string{"a: session states unreadable (node a: annotation networking.estuary.io/bgp-peers: "}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Condition(fabric(), tc.nodes)
			if c.Type != estuaryv1.ConditionBGPPeersEstablished || c.Status != tc.status || c.Reason != tc.reason || c.ObservedGeneration != 3 {
				t.Fatalf("condition %+v; want %s %s at generation 3", c, tc.status, tc.reason)
			}
			for _, want := range tc.contains {
				if !strings.Contains(c.Message, want) {
					t.Errorf("message %q lacks %q", c.Message, want)
				}
			}
		})
	}
	// Nodes are listed in order: b before c.
	c := Condition(fabric(), []corev1.Node{bgpNode("c", true, down), bgpNode("b", true, "")})
	if strings.Index(c.Message, "b: ") > strings.Index(c.Message, "c: ") {
		t.Errorf("nodes out of order: %s", c.Message)
	}
}

func TestConditionCapsTheNodesListed(t *testing.T) {
	var nodes []corev1.Node
	for i := range maxListed + 5 {
		nodes = append(nodes, bgpNode(strings.Repeat("n", i+1), true, ""))
	}
	c := Condition(fabric(), nodes)
	if !strings.HasSuffix(c.Message, "; and 5 more") || strings.Count(c.Message, "no session state published") != maxListed {
		t.Fatalf("message %q; want %d nodes named and 5 counted", c.Message, maxListed)
	}
}
