package podipam

// What a pod asks for, and whether it may have it: the planner reads the
// pod's Namespace (namespaceOf), applies the admission webhook's pod rules
// (admit), works out the pod's verified owner, retention and fixed
// addresses (plan) and turns its selection into an allocator request
// (request). It reads and reports; it changes nothing held.

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/internal/workload"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// planner works out a pod's request and facts.
type planner struct {
	client       client.Client // cached reads of namespaces, nodes and owners
	live         client.Reader // live reads when the cache does not show them
	alloc        Allocator
	topo         *Topology
	events       EventRecorder
	defaults     netmodel.Defaults
	maxRetainTTL time.Duration
	// optional tells optionalWatches that a pod of an optional kind was
	// seen, so it looks for the kind now rather than at its next poll.
	optional chan<- struct{}
}

// request turns a selection into an allocator request, resolving defaults
// against what the allocator knows: the overlay network when none is named,
// and, when no family is asked, the cluster's default family
// (netmodel.Defaults) or every family the network has public subnets for.
// The named subnets become one list per family, in the order the selection
// names them, which is the order the allocator tries them in.
func request(sel *netmodel.Selection, owner, overlay string, view subnetView) (ipam.Request, error) {
	req := ipam.Request{Owner: owner, Network: sel.Network, Families: sel.WantedFamilies()}
	if len(sel.Subnets) > 0 {
		req.Subnets = map[family.Family][]string{}
		for _, name := range sel.Subnets {
			cfg, err := view.Subnet(name)
			if err != nil {
				return req, fmt.Errorf("requested %w", err)
			}
			f := family.Of(cfg.Prefix.Addr())
			if slices.Contains(req.Subnets[f], name) {
				return req, fmt.Errorf("subnets %v name subnet %q twice", sel.Subnets, name)
			}
			if req.Network != "" && cfg.Network != req.Network {
				return req, fmt.Errorf("subnet %q belongs to network %q, not %q", name, cfg.Network, req.Network)
			}
			req.Network = cfg.Network
			req.Subnets[f] = append(req.Subnets[f], name)
		}
	}
	if req.Network == "" {
		if overlay == "" {
			return req, fmt.Errorf("no network named and the cluster has no Overlay network")
		}
		req.Network = overlay
	}
	if len(req.Families) == 0 && len(req.Subnets) == 0 {
		req.Families = publicFamilies(view, req.Network)
		if len(req.Families) == 0 {
			return req, fmt.Errorf("network %q has no subnet to allocate from", req.Network)
		}
	}
	return req, nil
}

// subnetView is the part of the allocator that describes subnets.
type subnetView interface {
	Subnet(name string) (ipam.SubnetConfig, error)
	Subnets() []string
}

// publicFamilies lists, IPv4 first, the families that network has
// non-private subnets for.
func publicFamilies(view subnetView, network string) []family.Family {
	var has4, has6 bool
	for _, name := range view.Subnets() {
		cfg, err := view.Subnet(name)
		if err != nil || cfg.Network != network || cfg.Private {
			continue
		}
		if cfg.Prefix.Addr().Is4() {
			has4 = true
		} else {
			has6 = true
		}
	}
	var fams []family.Family
	if has4 {
		fams = append(fams, family.IPv4)
	}
	if has6 {
		fams = append(fams, family.IPv6)
	}
	return fams
}

// facts is what a pod's records say about it besides its addresses, read
// once per allocation.
type facts struct {
	owner  workload.Ref
	set    *setRef
	retain *retention
	mac    string
	fixed  netmodel.Fixed
	places map[netip.Addr]string
}

// plan reads pod's Namespace (namespaceOf; an error when it cannot), admits
// pod (see admit), reads its fixed-address annotations and checks them
// against its network, and returns its allocator request and facts. A
// broken rule is a refusal.
func (p *planner) plan(ctx context.Context, key string, pod *corev1.Pod) (ipam.Request, facts, error) {
	var f facts
	ns, err := p.namespaceOf(ctx, pod)
	if err != nil {
		return ipam.Request{}, f, err
	}
	sel, err := p.admit(ctx, pod, ns)
	if err != nil {
		return ipam.Request{}, f, err
	}
	if f.fixed, err = netmodel.FixedFor(&sel, pod, ns); err != nil {
		return ipam.Request{}, f, &refusal{reason: ReasonAllocationFailed, err: err}
	}
	if f.owner, err = p.ownerOf(ctx, pod); err != nil {
		return ipam.Request{}, f, err
	}
	f.set = verifiedSet(pod, f.owner)
	if f.set != nil && !ordinalKept(f.set, &f.fixed, p.defaults) {
		f.set = nil
	}
	keptByOwner := f.set != nil || workload.IsVM(f.owner.Kind)
	bounds := netmodel.Bounds{MaxRetainTTL: p.maxRetainTTL}
	networks, subnets := p.topo.objects()
	n, err := netmodel.ResolveNetwork(&sel, networks, subnets)
	if err == nil {
		err = f.fixed.CheckRetention(bounds, n, keptByOwner)
	}
	if err == nil && f.fixed.Wants() && n != nil {
		var nodes corev1.NodeList
		if err := p.client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
			return ipam.Request{}, f, fmt.Errorf("list nodes for the fixed addresses of pod %s: %w", key, err)
		}
		f.places, err = f.fixed.CheckAddresses(n, subnets, netmodel.Claims{Nodes: netmodel.NodeAddresses(nodes.Items)})
	}
	if err != nil {
		return ipam.Request{}, f, &refusal{reason: ReasonAllocationFailed, err: err}
	}
	req, err := request(&sel, key, p.topo.Overlay(), p.alloc)
	if err != nil {
		return req, f, err
	}
	f.retain = retentionOf(&f.fixed, f.set != nil, bounds.MaxTTL())
	if workload.IsVM(f.owner.Kind) {
		f.retain = machineRetention(&f.fixed, !p.defaults.NoStatefulRetain)
	}
	f.mac = f.fixed.MAC
	return req, f, nil
}

// ownerOf is pod's verified top-level owner (workload.Of), read from the
// cache. When the cache confirms none of the controller the pod names (a
// ReplicaSet created a moment before its pod), the owners are read again
// live before the pod is taken for its own workload: a workload's next pod
// must not miss the addresses it keeps because the cache lags. Only a pod
// whose controller does not check out pays the live reads.
func (p *planner) ownerOf(ctx context.Context, pod *corev1.Pod) (workload.Ref, error) {
	owner, err := workload.Of(ctx, workload.LiveOptional(p.client, p.live), pod)
	if err == nil && unconfirmed(pod, owner) {
		owner, err = workload.Of(ctx, p.live, pod)
		if err == nil {
			p.reportUnverified(ctx, pod, owner)
		}
	}
	if err == nil && (workload.IsVM(owner.Kind) || owner.Kind == workload.KindKruiseStatefulSet) {
		p.sawOptionalKind()
	}
	return owner, err
}

// sawOptionalKind tells optionalWatches, without waiting, that a pod of an
// optional kind exists: the kind is served, so its watch should start now,
// before the machine or set can be deleted.
func (p *planner) sawOptionalKind() {
	select {
	case p.optional <- struct{}{}:
	default:
	}
}

// unconfirmed: pod names a controller, and the cache confirmed none of it
// (owner is the pod itself).
func unconfirmed(pod *corev1.Pod, owner workload.Ref) bool {
	return metav1.GetControllerOf(pod) != nil && owner.Kind == workload.KindPod
}

// verifiedSet is the StatefulSet and ordinal of pod if owner, its verified
// top-level owner (workload.Of), is that StatefulSet; nil otherwise, so a
// forged StatefulSet reference gives a pod nothing of the StatefulSet's.
func verifiedSet(pod *corev1.Pod, owner workload.Ref) *setRef {
	set := statefulOwner(pod)
	if set == nil || owner.Kind != set.kind || owner.Name != set.name || owner.UID != set.uid {
		return nil
	}
	return set
}

// retentionOf is a pod's retention: a StatefulSet's pod is kept by the
// StatefulSet's rule, with a deadline only when ip-retain-ttl gives one;
// any other pod is kept only when ip-retain is true, for ip-retain-ttl or
// defaultRetainTTL, shortened to maxTTL (the longest ip-retain-ttl
// allowed) when that is shorter.
func retentionOf(fx *netmodel.Fixed, stateful bool, maxTTL time.Duration) *retention {
	if stateful {
		if fx.TTL != nil {
			return &retention{ttl: fx.TTL}
		}
		return nil
	}
	if fx.Retain == nil || !*fx.Retain {
		return nil
	}
	if fx.TTLSet {
		return &retention{ttl: fx.TTL}
	}
	ttl := min(defaultRetainTTL, maxTTL)
	return &retention{ttl: &ttl}
}

// machineRetention is a virtual machine pod's retention: kept for the
// machine unless ip-retain is false (or unset while the cluster's default,
// keepByDefault, is off), until the machine is gone or for ip-retain-ttl
// when given.
func machineRetention(fx *netmodel.Fixed, keepByDefault bool) *retention {
	if fx.Retain != nil && !*fx.Retain || fx.Retain == nil && !keepByDefault {
		return nil
	}
	if fx.TTLSet {
		return &retention{ttl: fx.TTL}
	}
	return &retention{}
}

// ReasonNamespaceUnreadable is the event reason when a pod's Namespace
// could not be read, so its addresses wait: the namespace's annotations
// (network, subnet, family, pool, retention) decide them.
const ReasonNamespaceUnreadable = "NamespaceUnreadable"

// namespaceError is a failure to read a pod's Namespace. The pod is tried
// again with backoff; nothing is allocated from the defaults meanwhile.
type namespaceError struct {
	name string
	err  error
}

func (e *namespaceError) Error() string {
	return fmt.Sprintf("read namespace %s (its annotations decide the pod's addresses; nothing is allocated until it is read): %v", e.name, e.err)
}

func (e *namespaceError) Unwrap() error { return e.err }

// namespaceOf reads pod's Namespace from the cache and, when the cache
// does not show it (a namespace created a moment before its pod, an
// informer not yet synced), live from the API server. Every failure is an
// error, never "no namespace": a pod's addresses would otherwise come from
// the cluster's defaults instead of its namespace's annotations, for good.
// A namespace the API server does not know either is an error too: a pod
// cannot outlive its namespace (a deleted namespace's pods go first, while
// it is Terminating, and a Terminating namespace is still read), so the
// pod read from the cache is already gone, and its next reconcile, which
// finds it absent, releases what it holds.
func (p *planner) namespaceOf(ctx context.Context, pod *corev1.Pod) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	key := client.ObjectKey{Name: pod.Namespace}
	err := p.client.Get(ctx, key, ns)
	if apierrors.IsNotFound(err) {
		err = p.live.Get(ctx, key, ns)
	}
	switch {
	case err == nil:
		return ns, nil
	case apierrors.IsNotFound(err):
		log.FromContext(ctx).Info("namespace of the pod does not exist: the pod is being deleted, it is tried again",
			"pod", pod.Namespace+"/"+pod.Name, "namespace", pod.Namespace)
	default:
		p.events.Eventf(pod, nil, corev1.EventTypeWarning, ReasonNamespaceUnreadable, "Allocate",
			"cannot read namespace %s, whose annotations decide the pod's addresses; tried again: %v", pod.Namespace, err)
	}
	return nil, &namespaceError{name: pod.Namespace, err: err}
}

// refusal is a pod that breaks an admission rule: it gets no address, the
// reason is reported on it, and it is tried again later, since the objects
// that decide it (Networks, Subnets, the Node's labels) may change.
type refusal struct {
	reason string
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }

func (r *refusal) Unwrap() error { return r.err }

// admit applies the admission webhook's pod rules, so that a pod admitted
// while the webhook was bypassed or raced cannot be given an address the
// webhook would have refused: its network and subnet annotations (its own
// or its namespace's) must parse, exist and agree (netmodel.ResolveNetwork),
// and its node must lie in its Underlay network's domain. A pod asking for
// Underlay by type takes the Underlay network of its node (byNode). It
// returns the pod's selection, read once, with the cluster's defaults (and
// the network of a pod asking by type). ns may be nil.
func (p *planner) admit(ctx context.Context, pod *corev1.Pod, ns *corev1.Namespace) (netmodel.Selection, error) {
	networks, subnets := p.topo.objects()
	sel, err := netmodel.SelectionFor(pod, ns)
	if err != nil {
		return sel, &refusal{reason: ReasonAllocationFailed, err: err}
	}
	p.defaults.Apply(&sel)
	if sel.ByType() {
		if err := p.byNode(ctx, pod, &sel, networks); err != nil {
			return sel, err
		}
	}
	n, err := netmodel.ResolveNetwork(&sel, networks, subnets)
	if err != nil {
		return sel, &refusal{reason: ReasonAllocationFailed, err: err}
	}
	if n != nil && n.Spec.Type == estuaryv1.NetworkTypeGlobalBGP && sel.Network == "" && len(sel.Subnets) == 0 {
		// Asked for by type: the cluster's one GlobalBGP network, on any node.
		sel.Network = n.Name
	}
	domain := netmodel.DomainSelector(n)
	if domain == nil {
		return sel, nil
	}
	node := &corev1.Node{}
	switch err := p.client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); {
	case apierrors.IsNotFound(err):
		return sel, &refusal{reason: ReasonOutsideNetworkDomain, err: fmt.Errorf(
			"node %q does not exist, so it cannot be checked against network %q's nodeSelector %s",
			pod.Spec.NodeName, n.Name, netmodel.SelectorString(domain))}
	case err != nil:
		return sel, fmt.Errorf("get node %s: %w", pod.Spec.NodeName, err)
	}
	if netmodel.Attached(n, node.Labels) {
		return sel, nil
	}
	return sel, &refusal{reason: ReasonOutsideNetworkDomain, err: fmt.Errorf(
		"node %q is outside the domain of network %q: its labels do not match the network's nodeSelector %s",
		node.Name, n.Name, netmodel.SelectorString(domain))}
}

// byNode binds a pod asking for Underlay by type to the Underlay network of
// its node (netmodel.NodeUnderlay), preferring, should two domains hold the
// node, one with a free address of each family the pod wants. A node of no
// such domain is refused as outside the network domain.
func (p *planner) byNode(ctx context.Context, pod *corev1.Pod, sel *netmodel.Selection, networks []estuaryv1.Network) error {
	node := &corev1.Node{}
	switch err := p.client.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); {
	case apierrors.IsNotFound(err):
		return &refusal{reason: ReasonOutsideNetworkDomain, err: fmt.Errorf(
			"pod asks for an Underlay network by type and its node %q does not exist, so it has no Underlay network", pod.Spec.NodeName)}
	case err != nil:
		return fmt.Errorf("get node %s: %w", pod.Spec.NodeName, err)
	}
	hasRoom := func(n *estuaryv1.Network) bool {
		for _, f := range sel.WantedFamilies() {
			if st, err := p.alloc.NetworkStats(n.Name, f); err != nil || st.Available == 0 {
				return false
			}
		}
		return true
	}
	n, err := netmodel.NodeUnderlay(sel, node.Name, node.Labels, networks, hasRoom)
	if err != nil {
		return &refusal{reason: ReasonOutsideNetworkDomain, err: err}
	}
	sel.Bind(n, node.Name)
	return nil
}

// asRefusal returns err's refusal, if it is one.
func asRefusal(err error) (*refusal, bool) {
	var ref *refusal
	ok := errors.As(err, &ref)
	return ref, ok
}

// Event reasons for pods that get no address because they break a rule.
const (
	// ReasonAllocationFailed: the pod asks for something invalid (the
	// admission webhook's pod rules, see netmodel.ResolveNetwork), or the
	// allocator cannot serve it (e.g. its network is full).
	ReasonAllocationFailed = "AllocationFailed"
	// ReasonOutsideNetworkDomain: the pod is on a node its Underlay
	// network's nodeSelector does not match, or, asking for Underlay by
	// type, on a node of no Underlay domain it may use.
	ReasonOutsideNetworkDomain = "OutsideNetworkDomain"
)

// ReasonNotSelected is the event reason on a pod the manager's
// --pod-label-selector does not select: estuary gives it no address. The
// node daemon names this event in the error of a CNI ADD that waited for
// the pod's addresses in vain.
const ReasonNotSelected = "NotSelected"

// statefulOwner returns the StatefulSet (or Advanced StatefulSet)
// controlling pod and the pod's ordinal, or nil.
func statefulOwner(pod *corev1.Pod) *setRef {
	kind, name, ordinal, ok := workload.StatefulController(pod)
	if !ok {
		return nil
	}
	return &setRef{kind: kind, name: name, uid: string(metav1.GetControllerOf(pod).UID), ordinal: ordinal}
}
