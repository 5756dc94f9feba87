package netmodel

// Subnet layouts: what the fixed-address checks need of a Subnet, parsed
// once. A pod's ip-pool may name MaxPoolEntries entries of two addresses
// each, checked by the webhook and again by the manager on every try, so
// a check parses each subnet of the pod's network at most once (and, with
// a Layouts cache, once per change of the Subnet's spec) and finds an
// address's subnets by prefix instead of trying every subnet.

import (
	"net/netip"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// layout is one Subnet as the fixed-address checks see it.
type layout struct {
	name, network string
	// version is the Subnet (UID and generation) the layout was built from.
	version version
	private bool
	prefix  netip.Prefix
	// check is nil when the subnet's configuration does not parse or
	// validate (err says why): no address can be assigned in it.
	check *ipam.Checker
	err   error
	// claimers selects the namespaces that may take a private subnet's
	// addresses; reservedClaimers those that may name its reservedIPs.
	// Nil selects none.
	claimers, reservedClaimers labels.Selector
}

// version identifies a Subnet's spec: its generation changes with every
// change of the spec (not of its status), its UID when it is created again.
type version struct {
	uid        types.UID
	generation int64
}

func versionOf(sn *estuaryv1.Subnet) version {
	return version{uid: sn.UID, generation: sn.Generation}
}

func newLayout(sn *estuaryv1.Subnet) *layout {
	l := &layout{name: sn.Name, network: sn.Spec.Network, version: versionOf(sn), private: sn.Spec.Private,
		claimers: selectorOrEverything(sn.Spec.NamespaceSelector), reservedClaimers: selectorOrNothing(sn.Spec.ReservedNamespaceSelector)}
	cfg, err := SubnetConfig(sn)
	if err != nil {
		l.err = err
		return l
	}
	l.prefix = cfg.Prefix
	l.check, l.err = ipam.NewChecker(cfg)
	return l
}

// selectorOrNothing parses s; nil, or a selector that does not parse,
// selects nothing (a nil labels.Selector).
func selectorOrNothing(s *metav1.LabelSelector) labels.Selector {
	if s == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil
	}
	return sel
}

// selectorOrEverything parses s; nil selects everything, a selector that
// does not parse nothing.
func selectorOrEverything(s *metav1.LabelSelector) labels.Selector {
	if s == nil {
		return labels.Everything()
	}
	return selectorOrNothing(s)
}

// selects reports whether sel (nil: none) selects a namespace with these
// labels.
func selects(sel labels.Selector, nsLabels labels.Set) bool {
	return sel != nil && sel.Matches(nsLabels)
}

// Layouts caches subnet layouts by name, each rebuilt when its Subnet's
// spec changes (its generation) or it is created again (its UID); a Subnet
// without a UID (not read from the API) is parsed every time. It is safe
// for concurrent use; the zero value is not: use NewLayouts.
type Layouts struct {
	mu     sync.Mutex
	byName map[string]*layout
}

// NewLayouts returns an empty cache.
func NewLayouts() *Layouts { return &Layouts{byName: map[string]*layout{}} }

// of returns sn's layout, from the cache when it holds sn's version.
func (c *Layouts) of(sn *estuaryv1.Subnet) *layout {
	if c == nil || sn.UID == "" {
		return newLayout(sn)
	}
	if l, ok := c.byName[sn.Name]; ok && l.version == versionOf(sn) {
		return l
	}
	l := newLayout(sn)
	c.byName[sn.Name] = l
	return l
}

// forget drops the layouts of subnets not in subnets once the cache holds
// more than it: deleted subnets do not stay forever.
func (c *Layouts) forget(subnets []estuaryv1.Subnet) {
	if c == nil || len(c.byName) <= len(subnets) {
		return
	}
	keep := make(map[string]*layout, len(subnets))
	for i := range subnets {
		if l, ok := c.byName[subnets[i].Name]; ok {
			keep[subnets[i].Name] = l
		}
	}
	c.byName = keep
}

// subnetIndex finds the subnets of one network that hold an address: by
// the address's prefix at each prefix length the network's subnets have,
// not by trying every subnet.
type subnetIndex struct {
	// bits are the prefix lengths in use, shortest first, per family
	// (0: IPv4, 1: IPv6).
	bits     [2][]int
	byPrefix map[netip.Prefix][]*layout
}

// index builds the index of the subnets of network (only those named in
// only, when it is not empty), taking layouts from c (nil: parsed now).
func (c *Layouts) index(network string, only []string, subnets []estuaryv1.Subnet) *subnetIndex {
	if c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
	}
	ix := &subnetIndex{byPrefix: map[netip.Prefix][]*layout{}}
	for i := range subnets {
		sn := &subnets[i]
		if sn.Spec.Network != network || (len(only) > 0 && !slices.Contains(only, sn.Name)) {
			continue
		}
		ix.add(c.of(sn))
	}
	c.forget(subnets)
	for f := range ix.bits {
		slices.Sort(ix.bits[f])
	}
	return ix
}

// add indexes l; a subnet whose CIDR does not parse holds no address.
func (ix *subnetIndex) add(l *layout) {
	if !l.prefix.IsValid() {
		return
	}
	f, _ := family.Of(l.prefix.Addr()).Index()
	if !slices.Contains(ix.bits[f], l.prefix.Bits()) {
		ix.bits[f] = append(ix.bits[f], l.prefix.Bits())
	}
	ix.byPrefix[l.prefix] = append(ix.byPrefix[l.prefix], l)
}

// holding calls yield with each subnet whose prefix holds a, by prefix
// length, then in the order the subnets were given, until it returns
// false.
func (ix *subnetIndex) holding(a netip.Addr, yield func(*layout) bool) {
	f, _ := family.Of(a).Index()
	for _, bits := range ix.bits[f] {
		p, err := a.Prefix(bits)
		if err != nil {
			continue
		}
		for _, l := range ix.byPrefix[p] {
			if !yield(l) {
				return
			}
		}
	}
}
