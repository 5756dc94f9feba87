package cli

// Planning a connectivity test is pure: from the cluster's nodes, Networks
// and Subnets it decides which probe pods go where and which paths apply,
// and why a path that does not apply is skipped. Nothing here talks to the
// API server, so every choice is unit-tested on plain objects.
//
// Two nodes carry the overlay probes: A (the client, a second pod and the
// host-network pod) and B (the Service's backend). They are the first two
// usable nodes by name, so a rerun probes the same nodes. An underlay
// probe goes on a node of its network's domain other than A when there is
// one, so overlay <-> underlay crosses nodes as it does in practice. The
// StatefulSet's pod starts on B and is re-created on A: a kept address
// must follow its workload to another node, not only come back on the
// same one.

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// The probe pods by role; each is named after its role.
const (
	probeClient  = "client"     // overlay pod on node A: the source of most paths
	probeSame    = "same-node"  // overlay pod on node A
	probeOther   = "other-node" // overlay pod on node B: the Service's backend
	probeHost    = "host"       // host-network pod on node A
	probeRetain  = "retain"     // the StatefulSet whose pod is re-created
	probeService = "backend"    // the ClusterIP Service over other-node
	// probePolicyTarget is the overlay pod on node B that the policy
	// paths' NetworkPolicies select.
	probePolicyTarget = "policy-target"
)

// retainPod is the StatefulSet's only pod.
const retainPod = probeRetain + "-0"

// Path kinds, as printed and in -o json.
const (
	pathPodSame      = "pod-to-pod/same-node"
	pathPodAcross    = "pod-to-pod/across-nodes"
	pathService      = "pod-to-service"
	pathNodeAcross   = "node-to-pod/across-nodes"
	pathNodeSame     = "node-to-pod/same-node"
	pathExternal     = "pod-to-external"
	pathOverUnder    = "overlay-to-underlay"
	pathUnderOver    = "underlay-to-overlay"
	pathRetained     = "retained-address"
	pathUnderlayNone = "overlay-underlay"
	pathPolicyDeny   = "policy/deny-ingress"
	pathPolicyAllow  = "policy/allow-ingress"
	pathPolicyNone   = "policy"
)

// policyStep is the NetworkPolicies a policy path needs in place: each
// step adds its policy to those of the steps before it.
type policyStep int

const (
	// policyNone: the path needs no policy.
	policyNone policyStep = iota
	// policyDeny: the default-deny ingress policy of the target
	// (connectivity_objects.go, denyIngressObject).
	policyDeny
	// policyAllow: and the policy admitting the client to it
	// (allowClientObject).
	policyAllow
)

// expect is what the answer of a path's TCP probe must show.
type expect int

const (
	// expectClientIP: the peer saw the source pod's own address (no NAT).
	expectClientIP expect = iota
	// expectHostname: the named pod answered.
	expectHostname
	// expectConnect: a TCP connection was made (the external target).
	expectConnect
	// expectICMP: echo replies came back (an external target given as an
	// address without a port); no TCP probe.
	expectICMP
	// expectDenied: no TCP connection could be made (a policy drops it).
	expectDenied
)

// probePod is one probe pod of the plan.
type probePod struct {
	Name        string
	Node        string
	HostNetwork bool
	// Network is the Underlay network the pod asks for, for its
	// networking.estuary.io/network annotation; empty: the default.
	Network string
	// Backend marks the pod the Service selects.
	Backend bool
}

// probePath is one path the test checks.
type probePath struct {
	Kind string
	From string // probe pod the probe runs in
	// To is the probe pod that must answer; empty for the Service and the
	// external target.
	To       string
	Service  bool
	External string
	Expect   expect
	ICMP     bool
	// Skip says why the path is not checked; empty: it is.
	Skip string
	// Policy is the NetworkPolicies that must be in place first.
	Policy policyStep
}

// connPlan is what a connectivity test deploys and checks.
type connPlan struct {
	Namespace    string
	NodeA, NodeB string // NodeB == NodeA on a one-node cluster
	Usable       int    // usable nodes of the cluster
	Pods         []probePod
	// RetainFrom and RetainTo are the nodes of the StatefulSet's pod before
	// and after its re-create.
	RetainFrom, RetainTo string
	Underlays            []underlayChoice
	Paths                []probePath
}

// underlayChoice is an Underlay network the test puts a probe on.
type underlayChoice struct {
	Network, Subnet, Node, Pod string
}

// planInput is what the plan is made from.
type planInput struct {
	Namespace string
	Nodes     []corev1.Node
	Networks  []estuaryv1.Network
	Subnets   []estuaryv1.Subnet
	// NetworksErr is why the Networks could not be read (no estuary CRDs).
	NetworksErr error
	External    string
	// SkipPolicy leaves the policy paths out (--skip-policy).
	SkipPolicy bool
}

// makePlan decides the pods and paths of a test.
func makePlan(in planInput) (connPlan, error) {
	nodes, why := usableNodes(in.Nodes)
	if len(nodes) == 0 {
		return connPlan{}, fmt.Errorf("no node can run the probe pods: %s", strings.Join(why, "; "))
	}
	p := connPlan{Namespace: in.Namespace, NodeA: nodes[0], NodeB: nodes[0], Usable: len(nodes)}
	if len(nodes) > 1 {
		p.NodeB = nodes[1]
	}
	p.RetainFrom, p.RetainTo = p.NodeB, p.NodeA
	p.Pods = []probePod{
		{Name: probeClient, Node: p.NodeA},
		{Name: probeSame, Node: p.NodeA},
		{Name: probeOther, Node: p.NodeB, Backend: true},
		{Name: probeHost, Node: p.NodeA, HostNetwork: true},
	}
	p.Paths = overlayPaths(p)
	p.Paths = append(p.Paths, externalPath(in.External))
	p.Underlays, p.Paths = underlayPaths(in, nodes, p)
	for _, u := range p.Underlays {
		p.Pods = append(p.Pods, probePod{Name: u.Pod, Node: u.Node, Network: u.Network})
	}
	p.Paths = append(p.Paths, probePath{Kind: pathRetained, From: probeClient, To: retainPod, Expect: expectHostname, ICMP: true})
	if in.SkipPolicy {
		p.Paths = append(p.Paths, probePath{Kind: pathPolicyNone, Skip: "--skip-policy"})
		return p, nil
	}
	p.Pods = append(p.Pods, probePod{Name: probePolicyTarget, Node: p.NodeB})
	p.Paths = append(p.Paths, policyPaths()...)
	return p, nil
}

// policyPaths check that the node of the policy target enforces
// NetworkPolicy, last, when every other path has run: the client reaches
// the target until a default-deny ingress policy selects it, then only
// the client does, once a second policy admits it on netexec's port; the
// same-node probe stays denied.
func policyPaths() []probePath {
	return []probePath{
		{Kind: pathPolicyDeny, From: probeClient, To: probePolicyTarget, Policy: policyDeny, Expect: expectDenied},
		{Kind: pathPolicyAllow, From: probeClient, To: probePolicyTarget, Policy: policyAllow, Expect: expectClientIP},
		{Kind: pathPolicyDeny, From: probeSame, To: probePolicyTarget, Policy: policyAllow, Expect: expectDenied},
	}
}

// overlayPaths are the paths between the overlay probes, the Service and
// the host-network probe.
func overlayPaths(p connPlan) []probePath {
	out := []probePath{
		{Kind: pathPodSame, From: probeClient, To: probeSame, Expect: expectClientIP, ICMP: true},
		{Kind: pathPodSame, From: probeSame, To: probeClient, Expect: expectClientIP, ICMP: true},
		{Kind: pathPodAcross, From: probeClient, To: probeOther, Expect: expectClientIP, ICMP: true},
		{Kind: pathPodAcross, From: probeOther, To: probeClient, Expect: expectClientIP, ICMP: true},
		{Kind: pathService, From: probeClient, To: probeOther, Service: true, Expect: expectHostname},
		{Kind: pathNodeAcross, From: probeHost, To: probeOther, Expect: expectHostname, ICMP: true},
		{Kind: pathNodeSame, From: probeHost, To: probeClient, Expect: expectHostname, ICMP: true},
	}
	if p.NodeA == p.NodeB {
		for i := range out {
			if out[i].Kind == pathPodAcross || out[i].Kind == pathNodeAcross {
				out[i].Skip = "only one node can run the probe pods"
			}
		}
	}
	return out
}

// externalPath reaches --external-target: host:port over TCP, an address
// alone with ICMP.
func externalPath(target string) probePath {
	path := probePath{Kind: pathExternal, From: probeClient, External: target, Expect: expectConnect}
	switch {
	case target == "":
		path.Skip = "no --external-target given"
	case isAddress(target):
		path.Expect = expectICMP
	}
	return path
}

// isAddress says whether s is an IP address without a port.
func isAddress(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// usableNodes are the names, sorted, of the nodes a probe pod can run on:
// Ready, schedulable and without a NoSchedule or NoExecute taint; why says
// what keeps each other node out.
func usableNodes(nodes []corev1.Node) (usable, why []string) {
	for i := range nodes {
		n := &nodes[i]
		if reason := unusable(n); reason != "" {
			why = append(why, fmt.Sprintf("node %s %s", n.Name, reason))
			continue
		}
		usable = append(usable, n.Name)
	}
	if len(nodes) == 0 {
		why = append(why, "the cluster has no nodes")
	}
	slices.Sort(usable)
	return usable, why
}

func unusable(n *corev1.Node) string {
	if n.Spec.Unschedulable {
		return "is cordoned"
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute {
			return fmt.Sprintf("has taint %s:%s", t.Key, t.Effect)
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return ""
			}
			return "is not Ready"
		}
	}
	return "reports no Ready condition"
}

// underlayPaths chooses a probe for each Underlay network that can take one
// and adds its two paths, or one skipped path saying why none applies.
func underlayPaths(in planInput, nodes []string, p connPlan) ([]underlayChoice, []probePath) {
	paths := p.Paths
	if in.NetworksErr != nil {
		return nil, append(paths, probePath{Kind: pathUnderlayNone, Skip: fmt.Sprintf("estuary Networks unreadable: %v", in.NetworksErr)})
	}
	var chosen []underlayChoice
	var why []string
	for i := range in.Networks {
		nw := &in.Networks[i]
		if nw.Spec.Type != estuaryv1.NetworkTypeUnderlay {
			continue
		}
		c, reason := chooseUnderlay(nw, in.Subnets, usableOf(in.Nodes, nodes), in.Namespace, p.NodeA)
		if reason != "" {
			why = append(why, fmt.Sprintf("%s %s", nw.Name, reason))
			continue
		}
		c.Pod = fmt.Sprintf("underlay-%d", len(chosen)+1)
		chosen = append(chosen, c)
		paths = append(paths,
			probePath{Kind: pathOverUnder, From: probeClient, To: c.Pod, Expect: expectClientIP, ICMP: true},
			probePath{Kind: pathUnderOver, From: c.Pod, To: probeClient, Expect: expectClientIP, ICMP: true})
	}
	if len(chosen) == 0 {
		skip := "no Underlay network"
		if len(why) > 0 {
			skip = "no Underlay network can take a probe: " + strings.Join(why, "; ")
		}
		paths = append(paths, probePath{Kind: pathUnderlayNone, Skip: skip})
	}
	return chosen, paths
}

// usableOf are the nodes named in usable.
func usableOf(nodes []corev1.Node, usable []string) []*corev1.Node {
	var out []*corev1.Node
	for i := range nodes {
		if slices.Contains(usable, nodes[i].Name) {
			out = append(out, &nodes[i])
		}
	}
	return out
}

// chooseUnderlay picks the subnet and node of nw's probe, or says why nw
// cannot take one: the namespace is not allowed, no public subnet has a
// free address, or no usable node is in the domain (matches the network's
// nodeSelector).
func chooseUnderlay(nw *estuaryv1.Network, subnets []estuaryv1.Subnet, nodes []*corev1.Node, ns, avoid string) (underlayChoice, string) {
	if len(nw.Spec.Namespaces) > 0 && !slices.Contains(nw.Spec.Namespaces, ns) {
		return underlayChoice{}, fmt.Sprintf("does not allow namespace %s", ns)
	}
	subnet := ""
	for i := range subnets {
		sn := &subnets[i]
		if sn.Spec.Network == nw.Name && !sn.Spec.Private && hasFree(sn.Status.Available) {
			subnet = sn.Name
			break
		}
	}
	if subnet == "" {
		return underlayChoice{}, "has no public subnet with a free address"
	}
	sel := labels.SelectorFromSet(nw.Spec.NodeSelector)
	var domain []string
	for _, n := range nodes {
		if len(nw.Spec.NodeSelector) > 0 && sel.Matches(labels.Set(n.Labels)) {
			domain = append(domain, n.Name)
		}
	}
	if len(domain) == 0 {
		return underlayChoice{}, fmt.Sprintf("has no usable node in its domain (nodes with %s)", sel)
	}
	slices.Sort(domain)
	node := domain[0]
	if node == avoid && len(domain) > 1 {
		node = domain[1]
	}
	return underlayChoice{Network: nw.Name, Subnet: subnet, Node: node}, ""
}

// hasFree says whether a Subnet's status.available counts at least one
// address.
func hasFree(available string) bool {
	n, ok := new(big.Int).SetString(available, 10)
	return ok && n.Sign() > 0
}
