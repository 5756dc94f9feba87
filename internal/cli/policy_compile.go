package cli

// The daemon's own translation and compiler, run for one pod. Both are
// pure Go on plain values (no kernel), so every build of the plugin, on
// Linux and on a laptop, compiles the same rules the node does.

import (
	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/internal/policytranslate"
)

// compilePolicy runs policytranslate.Policy for the pod's endpoints over objs
// and compiles the result, as the daemon does each pass.
func compilePolicy(objs policyObjects, ns, name string, eps []podEndpoint) compiled {
	in := policytranslate.PolicyInput{
		Namespaces: objs.namespaces, Pods: objs.pods,
		NetworkPolicies: objs.nps, ClusterPolicies: objs.cnps,
		AdminNetworkPolicies: objs.anps, BaselineAdminNetworkPolicies: objs.banps,
	}
	for i := range objs.nodes {
		in.Nodes = append(in.Nodes, &objs.nodes[i])
	}
	for _, e := range eps {
		in.Endpoints = append(in.Endpoints, policytranslate.PolicyEndpoint{HostVeth: e.HostVeth, Addrs: e.Addrs, Namespace: ns, Name: name})
	}
	var out compiled
	node, terr := policytranslate.Policy(in)
	out.node = node
	for _, oe := range policytranslate.ObjectErrors(terr) {
		k := objKey{kind: oe.Kind, ns: oe.Namespace, name: oe.Name}
		for _, p := range oe.Problems {
			out.objectProblems = appendProblem(out.objectProblems, k, p.String())
		}
	}
	_, rest := policytranslate.SplitErrors(terr)
	for _, e := range rest {
		out.otherErrors = append(out.otherErrors, e.Error())
	}
	rs, err := policy.Compile(node)
	out.rules = rs
	if err != nil {
		out.otherErrors = append(out.otherErrors, "compile: "+err.Error())
	}
	return out
}
