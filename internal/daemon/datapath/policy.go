package datapath

// Policy. Each pass computes what this node enforces for its pods
// (policytranslate.Policy over the cached NetworkPolicies, ClusterNetworkPolicies,
// AdminNetworkPolicies and BaselineAdminNetworkPolicies when served,
// Namespaces, Pods and Nodes, for the
// endpoints of the pass's snapshot), compiles it into the nftables ruleset
// of package policy and has the table made equal to it in one batch
// (ops.Policy.Ensure reads the table back and applies only the
// difference, so a pass that changes nothing writes nothing, and a table
// someone edited is repaired).
//
// The part runs first after the read, before the parts that route to a
// new pod: a pod's chain is in place by the time the pass that makes it
// reachable from other nodes ends. Objects policytranslate cannot read are
// logged and treated as its design notes say (fail closed for admin Deny
// and Pass rules); the rest of the node's policy is still applied, so one
// bad object never opens or closes everything. A part failure is only a
// failed read of the cache or a failed write of the table: both retry with
// the loop's backoff.
//
// An endpoint whose Pod is not cached yet is reported and, while any
// policy exists, pending (policy.PendingChain: isolated, since a policy
// may select it); the pod's Add event triggers the pass that gives it its
// chains. The CNI server's ADD waits for a pass that includes its new
// endpoint, or holds the endpoint pending, before it replies
// (policygate.go).

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/internal/policytranslate"
)

// PolicyTable makes the node's policy table hold a ruleset; ops.Policy is
// one.
type PolicyTable interface {
	Ensure(want policy.Ruleset) (policy.Ops, error)
	Read() (policy.Table, error)
	Apply(o policy.Ops) error
}

// PolicyConfig configures the policy part.
type PolicyConfig struct {
	// Reader lists the policy objects and Namespaces and gets the pods of
	// the node's endpoints; the daemon's cache, which Trigger.WatchPolicy
	// registered.
	Reader client.Reader
	// Pods is the view of every pod of the cluster, read while a policy
	// exists (podview.go); nil reads every pod from Reader.
	Pods *PodView
	// Admin lists ClusterNetworkPolicies too; off when the API server does
	// not serve them.
	Admin bool
	// AdminNetworkPolicy and BaselineAdminNetworkPolicy list those
	// (v1alpha1) too; each off when the API server does not serve it.
	AdminNetworkPolicy, BaselineAdminNetworkPolicy bool
	// HostVeth names the host side of an endpoint's veth.
	HostVeth func(endpointstore.Key) string
	// PodToNode says whether a pod's egress policy judges what it sends
	// its own node (the table's skeleton).
	PodToNode policy.PodToNode
	// AdmitWait bounds how long Admit waits for a pass that includes the
	// new endpoint before it holds it pending (DefaultAdmitWait).
	AdmitWait time.Duration
	Log       logr.Logger
}

// PolicyPart keeps the node's policy table in line with the cluster's
// policies.
type PolicyPart struct {
	cfg     PolicyConfig
	table   PolicyTable
	metrics *Metrics
	gate    gate
	// eps, when set (AdmitFrom), is the endpoint store, which every pass
	// lists afresh instead of taking its snapshot's attachments.
	eps Endpoints
}

var (
	_ Part    = (*PolicyPart)(nil)
	_ Stopper = (*PolicyPart)(nil)
)

// NewPolicyPart returns the part enforcing policy through table.
func NewPolicyPart(cfg PolicyConfig, table PolicyTable) *PolicyPart {
	if cfg.AdmitWait <= 0 {
		cfg.AdmitWait = DefaultAdmitWait
	}
	return &PolicyPart{cfg: cfg, table: table, gate: gate{held: map[string]chan struct{}{}}}
}

// Name implements Part.
func (*PolicyPart) Name() string { return PartPolicy }

// recordTo implements metricsRecorder.
func (p *PolicyPart) recordTo(m *Metrics) { p.metrics = m }

// Sync computes the node's policy from snap and the cached policy objects
// and applies the difference to the table.
func (p *PolicyPart) Sync(ctx context.Context, snap *Snapshot) error {
	return p.sync(ctx, snap.Objects.Nodes, snap.Endpoints)
}

// compute is the ruleset of the node's policy for eps: their chains, and
// PendingChain for an endpoint whose pod is not cached yet while any
// policy exists.
func (p *PolicyPart) compute(ctx context.Context, nodes []*corev1.Node, all []endpointstore.Endpoint) (policy.Ruleset, error) {
	eps := PolicyEndpoints(all, p.cfg.HostVeth)
	in, err := p.read(ctx, eps)
	if err != nil {
		return policy.Ruleset{}, err
	}
	in.Nodes = nodes
	in.Endpoints = eps
	node, terr := policytranslate.Policy(in)
	if terr != nil {
		p.cfg.Log.Error(terr, "policy objects skipped or narrowed while computing the node's policy")
	}
	rs, cerr := policy.Compile(node)
	if cerr != nil {
		p.cfg.Log.Error(cerr, "policy endpoints closed: what they enforce could not be compiled, their chains drop everything")
	}
	p.metrics.policyProblems(terr, cerr)
	rs.Skeleton = policy.Skeleton{PodToNode: p.cfg.PodToNode}
	if policyObjects(in) == 0 {
		return rs, nil
	}
	if err := rs.Hold(unknownPods(eps, node)...); err != nil {
		return policy.Ruleset{}, fmt.Errorf("compile policy: %w", err)
	}
	return rs, nil
}

// policyObjects counts the policy objects of in.
func policyObjects(in policytranslate.PolicyInput) int {
	return len(in.NetworkPolicies) + len(in.ClusterPolicies) + len(in.AdminNetworkPolicies) + len(in.BaselineAdminNetworkPolicies)
}

// unknownPods are the host veths of eps that policytranslate gave no endpoint
// (their pod is not cached, or not a pod-network pod).
func unknownPods(eps []policytranslate.PolicyEndpoint, n policy.Node) []string {
	known := make(map[string]bool, len(n.Endpoints))
	for _, e := range n.Endpoints {
		known[e.HostVeth] = true
	}
	var out []string
	for _, e := range eps {
		if !known[e.HostVeth] {
			out = append(out, e.HostVeth)
		}
	}
	return out
}

// read lists the cached objects policy depends on, sharing the cache's
// objects (read-only) as the loop's read does. Pods are peers only of a
// policy: while the cluster has none, the pass reads the pods of the
// node's endpoints alone (whether each is known and on the pod network)
// instead of every pod of the cluster, which at 50,000 pods is most of a
// pass's work, and the table it computes is the same (no endpoint has a
// rule); with one, every pod, from the view of every pod once it has
// synced (podview.go).
func (p *PolicyPart) read(ctx context.Context, eps []policytranslate.PolicyEndpoint) (policytranslate.PolicyInput, error) {
	var (
		nps   networkingv1.NetworkPolicyList
		cnps  npv1beta1.ClusterNetworkPolicyList
		anps  npv1alpha1.AdminNetworkPolicyList
		banps npv1alpha1.BaselineAdminNetworkPolicyList
		nss   corev1.NamespaceList
	)
	shared := client.UnsafeDisableDeepCopy
	r := p.cfg.Reader
	lists := []client.ObjectList{&nps, &nss}
	if p.cfg.Admin {
		lists = append(lists, &cnps)
	}
	if p.cfg.AdminNetworkPolicy {
		lists = append(lists, &anps)
	}
	if p.cfg.BaselineAdminNetworkPolicy {
		lists = append(lists, &banps)
	}
	for _, l := range lists {
		if err := r.List(ctx, l, shared); err != nil {
			return policytranslate.PolicyInput{}, fmt.Errorf("read the cache for policy: %T: %w", l, err)
		}
	}
	in := policytranslate.PolicyInput{Namespaces: nss.Items, NetworkPolicies: nps.Items, ClusterPolicies: cnps.Items,
		AdminNetworkPolicies: anps.Items, BaselineAdminNetworkPolicies: banps.Items}
	if policyObjects(in) == 0 {
		if p.cfg.Pods != nil {
			p.cfg.Pods.Unneeded(time.Now())
		}
		pods, err := p.endpointPods(ctx, eps)
		in.Pods = pods
		return in, err
	}
	if p.cfg.Pods != nil {
		var err error
		if r, err = p.cfg.Pods.Reader(ctx); err != nil {
			return policytranslate.PolicyInput{}, fmt.Errorf("read the cache for policy: %w", err)
		}
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, shared); err != nil {
		return policytranslate.PolicyInput{}, fmt.Errorf("read the cache for policy: %T: %w", &pods, err)
	}
	in.Pods = pods.Items
	return in, nil
}

// Stop stops the view of every pod, if it runs.
func (p *PolicyPart) Stop(context.Context) {
	if p.cfg.Pods != nil {
		p.cfg.Pods.Stop()
	}
}

// endpointPods reads the cached pods of eps; a pod not cached is left out
// (policytranslate reports its endpoint).
func (p *PolicyPart) endpointPods(ctx context.Context, eps []policytranslate.PolicyEndpoint) ([]corev1.Pod, error) {
	out := make([]corev1.Pod, 0, len(eps))
	for _, e := range eps {
		var pod corev1.Pod
		err := p.cfg.Reader.Get(ctx, client.ObjectKey{Namespace: e.Namespace, Name: e.Name}, &pod)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("read the cache for policy: pod %s/%s: %w", e.Namespace, e.Name, err)
		}
		out = append(out, pod)
	}
	return out, nil
}

// PolicyEndpoints are the endpoints policy applies to: every attachment of
// the store with its pod and addresses, its host veth named by hostVeth.
// Attachments without a pod (recovered from the kernel before their pod
// was known) are left out.
func PolicyEndpoints(eps []endpointstore.Endpoint, hostVeth func(endpointstore.Key) string) []policytranslate.PolicyEndpoint {
	out := make([]policytranslate.PolicyEndpoint, 0, len(eps))
	for _, e := range eps {
		if e.PodName == "" {
			continue
		}
		pe := policytranslate.PolicyEndpoint{HostVeth: hostVeth(e.Key), Namespace: e.PodNamespace, Name: e.PodName}
		for _, s := range e.IPs {
			if p, err := netip.ParsePrefix(s); err == nil && !slices.Contains(pe.Addrs, p.Addr().Unmap()) {
				pe.Addrs = append(pe.Addrs, p.Addr().Unmap())
			}
		}
		out = append(out, pe)
	}
	return out
}
