package netmodel

// Tenancy bounds: what an administrator lets a pod hold, whatever its
// annotations ask for.
//
//   - How long addresses are kept: every ip-retain-ttl is at most the
//     cluster's maximum (Bounds, the manager's --max-retain-ttl), and Never
//     is allowed only in the namespaces a Network's
//     spec.retention.neverNamespaceSelector selects.
//   - Which addresses may be named (ip-address, ip-pool): never a Node's
//     address; a Subnet's reservedIPs only from the namespaces its
//     spec.reservedNamespaceSelector selects; a private Subnet's addresses
//     (and the subnet itself, named by the subnet annotation) only from the
//     namespaces its spec.namespaceSelector selects.
//   - How large a pool may be: MaxPoolEntries.
//
// Networks and Subnets are cluster-scoped objects only cluster
// administrators write, so a tenant cannot widen these bounds; namespace
// annotations, which a namespace's own users may set in some clusters,
// never do.

import (
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
)

// DefaultMaxRetainTTL is the longest ip-retain-ttl when Bounds sets none:
// a week, above the 24h a retaining pod gets by default.
const DefaultMaxRetainTTL = 7 * 24 * time.Hour

// MaxPoolEntries bounds ip-pool and mac-pool: every entry is checked
// against the pod's network by the webhook and again by the manager on
// every try.
const MaxPoolEntries = 256

// Bounds are the cluster-wide limits an administrator sets on the manager,
// which serves the webhook too.
type Bounds struct {
	// MaxRetainTTL is the longest ip-retain-ttl a pod may ask for
	// (--max-retain-ttl); 0 means DefaultMaxRetainTTL.
	MaxRetainTTL time.Duration
}

// MaxTTL is the longest ip-retain-ttl allowed.
func (b Bounds) MaxTTL() time.Duration {
	if b.MaxRetainTTL > 0 {
		return b.MaxRetainTTL
	}
	return DefaultMaxRetainTTL
}

// retains reports whether the pod's addresses are kept when it goes: a
// StatefulSet's pod (stateful) unless ip-retain, or the cluster's default
// (Defaults.NoStatefulRetain), is false; any other pod only when ip-retain
// is true.
func (f *Fixed) retains(stateful bool) bool {
	if f.Retain != nil {
		return *f.Retain
	}
	return stateful && (f.sel == nil || !f.sel.defaults.NoStatefulRetain)
}

// CheckRetention checks the ip-retain-ttl of a pod whose addresses are
// kept (see retains) against b and network n (nil: the pod gets no
// address, so nothing is kept): a duration must not exceed b.MaxTTL, and
// Never needs n's spec.retention.neverNamespaceSelector to select the
// pod's namespace. Never on a StatefulSet's pod is what its StatefulSet
// does by default (kept while it wants the ordinal) and is always allowed.
func (f *Fixed) CheckRetention(b Bounds, n *estuaryv1.Network, stateful bool) error {
	if !f.TTLSet || !f.retains(stateful) {
		return nil
	}
	key := estuaryv1.AnnotationIPRetainTTL
	if f.TTL != nil {
		if limit := b.MaxTTL(); *f.TTL > limit {
			return f.sel.deny(key, "%q is longer than the cluster's maximum retention %s (the manager's --max-retain-ttl)", f.ttlText, limit)
		}
		return nil
	}
	if stateful || n == nil || neverAllowed(n, f.sel) {
		return nil
	}
	why := fmt.Sprintf("it does not select namespace %q", f.sel.Namespace)
	if n.Spec.Retention == nil || n.Spec.Retention.NeverNamespaceSelector == nil {
		why = "it is unset, so no namespace may"
	}
	return f.sel.deny(key, "is %s, which %s %q allows only to pods of the namespaces its spec.retention.neverNamespaceSelector selects (%s); ask for a duration of at most %s instead",
		estuaryv1.RetainNever, KindNetwork, n.Name, why, b.MaxTTL())
}

// neverAllowed reports whether pods with this selection may keep network
// n's addresses with ip-retain-ttl: Never.
func neverAllowed(n *estuaryv1.Network, sel *Selection) bool {
	r := n.Spec.Retention
	return r != nil && selects(selectorOrNothing(r.NeverNamespaceSelector), sel.namespaceSet())
}

// NodeAddress is an address a Node reports in status.addresses.
type NodeAddress struct {
	Node string
	Type corev1.NodeAddressType
}

// NodeAddresses maps every InternalIP and ExternalIP of nodes to its Node.
func NodeAddresses(nodes []corev1.Node) map[netip.Addr]NodeAddress {
	out := map[netip.Addr]NodeAddress{}
	for i := range nodes {
		node := &nodes[i]
		for _, na := range node.Status.Addresses {
			if na.Type != corev1.NodeInternalIP && na.Type != corev1.NodeExternalIP {
				continue
			}
			if a, err := netip.ParseAddr(na.Address); err == nil {
				out[a.Unmap()] = NodeAddress{Node: node.Name, Type: na.Type}
			}
		}
	}
	return out
}

// Claims is what the addresses a pod names are checked against besides
// its network's subnets.
type Claims struct {
	// Nodes are the cluster's Node addresses (see NodeAddresses), which
	// are never given to a pod.
	Nodes map[netip.Addr]NodeAddress
	// Layouts caches the subnets' layouts across checks; nil parses each
	// subnet once per check.
	Layouts *Layouts
}

// claimable says why the pod may not be given a, which subnet l can
// assign, or nil: l is private and its spec.namespaceSelector does not
// select the pod's namespace, or a is reserved and l's
// spec.reservedNamespaceSelector does not.
func (f *Fixed) claimable(l *layout, a netip.Addr) error {
	ns := f.sel.namespaceSet()
	if l.private && !selects(l.claimers, ns) {
		return fmt.Errorf("lies in private %s %q, whose spec.namespaceSelector does not select namespace %q", KindSubnet, l.name, f.sel.Namespace)
	}
	if !l.check.Reserved(a) || selects(l.reservedClaimers, ns) {
		return nil
	}
	why := fmt.Sprintf("it does not select namespace %q", f.sel.Namespace)
	if l.reservedClaimers == nil {
		why = "it is unset or invalid, so no namespace may"
	}
	return fmt.Errorf("is reserved in %s %q (spec.range.reservedIPs), and only pods of the namespaces its spec.reservedNamespaceSelector selects may name it; %s",
		KindSubnet, l.name, why)
}

// allowsSubnets refuses a named private subnet whose spec.namespaceSelector
// does not select the pod's namespace.
func allowsSubnets(sel *Selection, subnets []estuaryv1.Subnet) error {
	for _, name := range sel.Subnets {
		sn := findSubnet(name, subnets)
		if sn == nil || !sn.Spec.Private || selects(selectorOrEverything(sn.Spec.NamespaceSelector), sel.namespaceSet()) {
			continue
		}
		return sel.deny(estuaryv1.AnnotationSubnet, "names private %s %q, whose spec.namespaceSelector does not select namespace %q",
			KindSubnet, name, sel.Namespace)
	}
	return nil
}

// namespaceSet is the label set a selector is matched against when the
// selection has none (a Selection built by hand).
func (s *Selection) namespaceSet() labels.Set {
	if s.NamespaceLabels == nil {
		return namespaceLabels(s.Namespace, nil)
	}
	return s.NamespaceLabels
}
