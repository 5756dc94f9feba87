// Package policytranslate turns the policy objects of the API
// (NetworkPolicies, ClusterNetworkPolicies, and AdminNetworkPolicies and
// BaselineAdminNetworkPolicies read as the ClusterNetworkPolicies they
// convert to) into the model of package policy: what one node enforces
// for its local pod endpoints (Policy, over a PolicyInput of plain lists:
// endpoints, namespaces, pods, nodes and the policies). Its design notes
// are in policy.go.
//
// It also says what of one object no node can enforce as written
// (NetworkPolicyProblems, ClusterPolicyProblems, AdminNetworkPolicyProblems,
// BaselineAdminNetworkPolicyProblems), by running the very translation
// Policy runs, over no pods; Policy reports the same Problems in its error,
// one ObjectError per object. So the node daemon (package datapath, which
// enforces Policy's result) and the manager (package policystatus, which
// reports the problems on the objects) read a policy the same way without
// importing each other.
//
// It is pure: no client, no cache, no kernel; equal inputs give equal
// outputs.
package policytranslate
