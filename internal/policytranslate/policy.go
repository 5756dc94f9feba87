package policytranslate

// Policy translation: NetworkPolicy and ClusterNetworkPolicy (its Admin
// and Baseline tiers) into the model of package policy.
//
// Design notes.
//
// Peers are addresses. A pod selector becomes the /32 and /128 of every
// pod it selects (status.podIPs, and for a local pod also the addresses
// its endpoint was plumbed with, which the API may not show yet).
// Host-network pods are never selected, as subjects or as peers, and
// neither are pods that have finished (Succeeded, Failed): their addresses
// may already belong to another pod.
//
// Named ports. A named port is resolved against the pod that receives the
// packet: for ingress the local pod (one endpoint's rule keeps its ID and
// peers and gets that pod's numbers), for egress each peer pod. An egress
// rule with named ports is therefore split: the numbered ports keep the
// rule's ID with all its peers, and each resolved (protocol, number) gets
// a rule of its own, ID suffixed "/<protocol>-<number>", whose peers are
// the pods that resolve a name to it. A name that resolves nowhere
// matches nothing; a rule left with no port at all is dropped (an empty
// port list would mean every port).
//
// Rule IDs name the peer set, so they depend on the policy and the rule's
// position only: "np/<namespace>/<name>/<ingress|egress>/<i>",
// "cnp/<name>/<ingress|egress>/<i>".
//
// Unreadable input fails closed, and costs its own object only. A
// NetworkPolicy whose podSelector cannot be read is skipped (nobody knows
// whom it selects); one of its rules with any part that cannot be read is
// dropped while the policy still isolates what it selects. A
// ClusterNetworkPolicy rule that cannot be read, or with a domainNames
// peer (which this version cannot honour), follows network-policy-api's
// guidance for an unknown peer: an Accept rule matches nothing, a Deny or
// Pass rule becomes "deny all". Every rule kept has passed the compiler's
// validation (policy.Rule.Validate), so no object can make policy.Compile
// close an endpoint. Each problem is reported in the returned error as an
// ObjectError of its object, with its field path; NetworkPolicyProblems and
// ClusterPolicyProblems run the same code (problems.go). What depends on
// pods (a named port no pod has) is not a problem of the object.
//
// IPv4-mapped prefixes. An ipBlock or network prefix is masked; one inside
// ::ffff:0:0/96 of at least 96 bits is the IPv4 prefix of its last
// bits-96 bits, as a mapped address is its IPv4 address. A shorter prefix
// holds no mapped address once masked: it stays an IPv6 prefix and
// matches IPv6 traffic only. An except is unmapped the same way, so a
// mapped except under an IPv6 cidr takes nothing from it (mapped
// addresses never travel as IPv6). None of that is a problem.
//
// Tiers. Admin-tier rules become the model's admin tier (Accept is Allow;
// Pass skips to the NetworkPolicy tier). Baseline-tier rules become the
// model's baseline; there Pass skips the tier's remaining rules, and what
// no tier decides is admitted, so a baseline Pass is an Allow.
//
// Order. Within a tier rules come in priority order, lower first; policies
// of equal priority (whose relative order upstream leaves to the
// implementation) are ordered by name. Endpoints come out sorted by host
// veth, peers sorted by address, so equal inputs give equal outputs.

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

// PolicyInput is what a node's policy depends on: its local pod endpoints
// and the cluster's objects, as plain lists.
type PolicyInput struct {
	Endpoints       []PolicyEndpoint
	Namespaces      []corev1.Namespace
	Pods            []corev1.Pod
	Nodes           []*corev1.Node // peers of admin egress rules' nodes
	NetworkPolicies []networkingv1.NetworkPolicy
	ClusterPolicies []npv1beta1.ClusterNetworkPolicy
	// AdminNetworkPolicies and BaselineAdminNetworkPolicies (v1alpha1)
	// are read as the ClusterNetworkPolicies they convert to
	// (policy_anp.go).
	AdminNetworkPolicies         []npv1alpha1.AdminNetworkPolicy
	BaselineAdminNetworkPolicies []npv1alpha1.BaselineAdminNetworkPolicy
}

// PolicyEndpoint is a local pod interface: its host veth, its addresses
// and the pod it belongs to.
type PolicyEndpoint struct {
	HostVeth  string
	Addrs     []netip.Addr
	Namespace string
	Name      string
}

// Policy translates in into what the node enforces: one Endpoint per
// local endpoint whose pod is known. Objects it cannot read are reported
// in the error and treated as the design notes above say; the rest of the
// result stays valid.
func Policy(in PolicyInput) (policy.Node, error) {
	ix := newIndex(in)
	nps := ix.networkPolicies(in.NetworkPolicies)
	admin, baseline := ix.adminTiers(in)
	var out policy.Node
	eps := slices.Clone(in.Endpoints)
	slices.SortFunc(eps, func(a, b PolicyEndpoint) int { return strings.Compare(a.HostVeth, b.HostVeth) })
	for _, e := range eps {
		pod := ix.pods[podKey{e.Namespace, e.Name}]
		if pod == nil || pod.hostNetwork {
			ix.errorf("endpoint %s: pod %s/%s is not known as a pod-network pod: no policy applied", e.HostVeth, e.Namespace, e.Name)
			continue
		}
		ep := policy.Endpoint{HostVeth: e.HostVeth, Addrs: slices.Clone(e.Addrs)}
		for _, a := range admin {
			if a.subject.selects(ix, pod) {
				ep.Ingress.Admin = append(ep.Ingress.Admin, a.ingress.forLocal(pod)...)
				ep.Egress.Admin = append(ep.Egress.Admin, a.egress...)
			}
		}
		for _, np := range nps[e.Namespace] {
			np.apply(ix, pod, &ep)
		}
		for _, b := range baseline {
			if b.subject.selects(ix, pod) {
				ep.Ingress.Baseline = append(ep.Ingress.Baseline, b.ingress.forLocal(pod)...)
				ep.Egress.Baseline = append(ep.Egress.Baseline, b.egress...)
			}
		}
		out.Endpoints = append(out.Endpoints, ep)
	}
	return out, errors.Join(ix.errs...)
}

func (ix *index) errorf(format string, args ...any) {
	ix.errs = append(ix.errs, fmt.Errorf(format, args...))
}
