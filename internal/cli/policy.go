package cli

// `policy POD`: the policies that select a pod, why, and the rules the
// pod's node enforces for it, computed here by the daemon's own
// translation and compiler (policytranslate.Policy, policy.Compile) over the
// objects the API server serves, for that one pod as the node's only
// endpoint. The pod's host veth is named as its daemon names it when the
// daemon's endpoints can be read (pods/exec); otherwise the chains are
// shown under a placeholder name.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	"github.com/estuary-cni/estuary/internal/dataplane/desired"
	"github.com/estuary-cni/estuary/internal/dataplane/policy"
)

// policyFlags are `policy POD`'s options.
type policyFlags struct {
	output                          string
	skipDaemon                      bool
	daemonNamespace, daemonSelector string
}

func policyCmd(o *options) *cobra.Command {
	f := policyFlags{}
	c := &cobra.Command{
		Use:   "policy POD",
		Short: "Show the policies that select a pod, why, and the rules its node enforces for it",
		Long: `policy lists the NetworkPolicies of the pod's namespace and the ClusterNetworkPolicies
(Admin tier, then Baseline, by priority; and the AdminNetworkPolicies and
BaselineAdminNetworkPolicies, which the daemon enforces as the ClusterNetworkPolicies
they convert to) that select the pod, in the order they are
evaluated, with the selector that matched and the directions each has a say in; then the
pod's rules and its node's chains in nft's syntax (table inet estuary-policy). They are
computed here, by the daemon's own translation and compiler, from the same objects the
daemon reads (NetworkPolicies, ClusterNetworkPolicies, Namespaces, Pods, Nodes): what the
pod's node enforces once it has seen them. What of a policy no node can enforce as
written is listed under it.

The chains are named after the pod's host veth, which the pod's daemon knows
(estuary-daemon endpoints, through pods/exec); with --skip-daemon, or when it cannot be
read, they are named after a placeholder. 'policy drops' lists what the nodes dropped
(a pod named drops is 'policy pod/drops').`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkReportFormat("policy", f.output); err != nil {
				return err
			}
			return runPolicy(cmd.Context(), o, f, strings.TrimPrefix(args[0], "pod/"))
		},
	}
	fl := c.Flags()
	fl.StringVarP(&f.output, "output", "o", "text", reportFormats)
	fl.BoolVar(&f.skipDaemon, "skip-daemon", false, "do not ask the pod's daemon for its host veth (no pods/exec)")
	fl.StringVar(&f.daemonNamespace, "daemon-namespace", defaultDaemonNamespace, "namespace of the estuary-daemon pods")
	fl.StringVar(&f.daemonSelector, "daemon-selector", defaultDaemonSelector, "label selector of the estuary-daemon pods")
	c.AddCommand(policyDropsCmd(o))
	return c
}

// policyObjects are the objects a node's policy is computed from.
type policyObjects struct {
	namespaces []corev1.Namespace
	pods       []corev1.Pod
	nodes      []corev1.Node
	nps        []networkingv1.NetworkPolicy
	cnps       []npv1beta1.ClusterNetworkPolicy
	anps       []npv1alpha1.AdminNetworkPolicy
	banps      []npv1alpha1.BaselineAdminNetworkPolicy
}

// objKey names a policy object.
type objKey struct{ kind, ns, name string }

// compiled is what the daemon's code made of the objects for the pod.
type compiled struct {
	node           policy.Node
	rules          policy.Ruleset
	objectProblems map[objKey][]string
	otherErrors    []string
}

func appendProblem(m map[objKey][]string, k objKey, p string) map[objKey][]string {
	if m == nil {
		m = map[objKey][]string{}
	}
	m[k] = append(m[k], p)
	return m
}

// podPolicy is `policy POD -o json`.
type podPolicy struct {
	Pod       string   `json:"pod"`
	Node      string   `json:"node"`
	Addresses []string `json:"addresses"`
	// Policies select the pod, in evaluation order.
	Policies []selecting `json:"policies"`
	// Endpoints are the pod's interfaces and their chains; absent when
	// the rules could not be computed (Notes says why).
	Endpoints []endpointChains `json:"endpoints"`
	// Problems are what the translation or the compiler reported that no
	// listed policy accounts for.
	Problems []string `json:"problems,omitempty"`
	Notes    []string `json:"notes,omitempty"`
}

func runPolicy(ctx context.Context, o *options, f policyFlags, name string) error {
	k, err := o.newClient()
	if err != nil {
		return err
	}
	ns := o.ns()
	var pod corev1.Pod
	if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("policy: pod %s/%s not found", ns, name)
		}
		return fmt.Errorf("policy: read pod %s/%s: %w", ns, name, err)
	}
	switch {
	case pod.Spec.HostNetwork:
		return fmt.Errorf("policy: pod %s/%s is on the host network: no policy applies to it", ns, name)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return fmt.Errorf("policy: pod %s/%s has finished (%s): no policy applies to it", ns, name, pod.Status.Phase)
	}
	objs, notes, err := readPolicyObjects(ctx, k, ns)
	if err != nil {
		return fmt.Errorf("policy: pod %s/%s: %w", ns, name, err)
	}
	eps, veNote := podEndpoints(ctx, o, k, f, &pod)
	if veNote != "" {
		notes = append(notes, veNote)
	}
	r, err := explainPolicy(&pod, objs, eps)
	if err != nil {
		return fmt.Errorf("policy: pod %s/%s: %w", ns, name, err)
	}
	r.Notes = append(notes, r.Notes...)
	if f.output != "text" {
		return report(o.streams.Out, f.output, r)
	}
	return writePodPolicy(o.streams.Out, r)
}

// readPolicyObjects reads what the pod's policy depends on: the
// NetworkPolicies of ns, the ClusterNetworkPolicies when they are served,
// the AdminNetworkPolicies and BaselineAdminNetworkPolicies when served,
// every Namespace, Pod and Node.
func readPolicyObjects(ctx context.Context, k client.Client, ns string) (policyObjects, []string, error) {
	var (
		o     policyObjects
		notes []string
		nss   corev1.NamespaceList
		pods  corev1.PodList
		nodes corev1.NodeList
		nps   networkingv1.NetworkPolicyList
		cnps  npv1beta1.ClusterNetworkPolicyList
		anps  npv1alpha1.AdminNetworkPolicyList
		banps npv1alpha1.BaselineAdminNetworkPolicyList
	)
	for _, l := range []struct {
		list client.ObjectList
		opts []client.ListOption
	}{{&nss, nil}, {&pods, nil}, {&nodes, nil}, {&nps, []client.ListOption{client.InNamespace(ns)}}} {
		if err := k.List(ctx, l.list, l.opts...); err != nil {
			return o, nil, fmt.Errorf("list %T: %w", l.list, err)
		}
	}
	for _, l := range []struct {
		list client.ObjectList
		what string
	}{{&cnps, "ClusterNetworkPolicies (policy.networking.k8s.io/v1beta1)"}, {&anps, "AdminNetworkPolicies (v1alpha1)"},
		{&banps, "BaselineAdminNetworkPolicies (v1alpha1)"}} {
		if err := k.List(ctx, l.list); err != nil {
			if !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
				return o, nil, fmt.Errorf("list %s: %w", l.what, err)
			}
			notes = append(notes, "the API server does not serve "+l.what)
		}
	}
	o.namespaces, o.pods, o.nodes, o.nps = nss.Items, pods.Items, nodes.Items, nps.Items
	o.cnps, o.anps, o.banps = cnps.Items, anps.Items, banps.Items
	return o, notes, nil
}

// podEndpoints are the pod's interfaces: named as its daemon names their
// host veths when the daemon's endpoints can be read, else one
// placeholder; each with the pod's addresses (status.podIPs).
func podEndpoints(ctx context.Context, o *options, k client.Reader, f policyFlags, pod *corev1.Pod) ([]podEndpoint, string) {
	var addrs []netip.Addr
	for _, ip := range pod.Status.PodIPs {
		if a, err := netip.ParseAddr(ip.IP); err == nil {
			addrs = append(addrs, a.Unmap())
		}
	}
	placeholder := []podEndpoint{{HostVeth: placeholderVeth, Addrs: addrs}}
	if f.skipDaemon {
		return placeholder, "--skip-daemon: the chains are named after the placeholder " + placeholderVeth + ", not the pod's host veth"
	}
	veths, err := daemonVeths(ctx, o, k, f, pod)
	if err != nil {
		return placeholder, fmt.Sprintf("the pod's host veth is not known (%v): the chains are named after the placeholder %s", err, placeholderVeth)
	}
	out := make([]podEndpoint, 0, len(veths))
	for _, v := range veths {
		out = append(out, podEndpoint{HostVeth: v, Addrs: addrs})
	}
	return out, ""
}

// daemonVeths are the host veths of the pod's attachments, from the
// daemon of its node.
func daemonVeths(ctx context.Context, o *options, k client.Reader, f policyFlags, pod *corev1.Pod) ([]string, error) {
	if pod.Spec.NodeName == "" {
		return nil, errors.New("the pod is not scheduled")
	}
	cfg, err := o.config()
	if err != nil {
		return nil, err
	}
	ex, err := newDaemonEndpoints(cfg, k, f.daemonNamespace, f.daemonSelector)
	if err != nil {
		return nil, err
	}
	eps, err := ex.Endpoints(ctx, pod.Spec.NodeName)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range eps {
		if e.PodNamespace == pod.Namespace && e.PodName == pod.Name && (e.PodUID == "" || e.PodUID == string(pod.UID)) {
			out = append(out, desired.HostVethName(e.ContainerID, e.IfName))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the daemon of node %s holds no endpoint of the pod", pod.Spec.NodeName)
	}
	slices.Sort(out)
	return out, nil
}
