package netmodel

// Fixed addresses: the annotations by which a pod asks for given addresses
// (ip-address, or one entry of ip-pool), a given MAC (mac-address, or one
// entry of mac-pool), and whether its addresses outlive it (ip-retain,
// ip-retain-ttl). The webhook and the manager both parse them here and check
// them against the same networks and subnets, so a pod the webhook would
// refuse is refused again by the manager when the webhook was bypassed.
//
// ip-address and mac-address are read from the pod only: on a namespace they
// would give every pod the same address. ip-pool, mac-pool, ip-retain and
// ip-retain-ttl fall back to the namespace's, as the network annotations do.
// What a pod may hold this way is bounded by the administrator (see
// tenancy.go).

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/family"
)

// Fixed is what a pod asks for through the fixed-address annotations.
type Fixed struct {
	// Addresses is the ip-address annotation: at most one address per
	// family, IPv4 first; nil when unset.
	Addresses []netip.Addr
	// Pool is the ip-pool annotation: entries of one address per family,
	// every entry of the same families, in the order written.
	Pool [][]netip.Addr
	// MAC is the mac-address annotation in canonical form, or "".
	MAC string
	// MACPool is the mac-pool annotation, canonical, in the order written.
	MACPool []string
	// Retain is the ip-retain annotation; nil when unset.
	Retain *bool
	// TTL is the ip-retain-ttl annotation; nil when unset or Never (see
	// TTLSet).
	TTL *time.Duration
	// TTLSet: ip-retain-ttl was set (to a duration or to Never).
	TTLSet bool

	sel     *Selection
	ttlText string
}

// Wants reports whether the pod asks for given addresses.
func (f *Fixed) Wants() bool { return len(f.Addresses) > 0 || len(f.Pool) > 0 }

// FixedFor reads the fixed-address annotations of pod (and, for the keys
// that may be inherited, of ns, which may be nil) into sel's Fixed, checking
// that every value parses. ip-pool, mac-pool and ip-retain may be written
// in hybridnet's form too (see aliases.go). Errors are Denials naming the
// key as written.
func FixedFor(sel *Selection, pod *corev1.Pod, ns *corev1.Namespace) (Fixed, error) {
	f := Fixed{sel: sel}
	var err error
	get := func(key string, inherit bool) string {
		if err != nil {
			return ""
		}
		from := ns
		if !inherit {
			from = nil
		}
		var v string
		v, err = sel.lookup(pod, from, key)
		return v
	}
	addr, pool, mac, macPool := get(estuaryv1.AnnotationIPAddress, false), get(estuaryv1.AnnotationIPPool, true),
		get(estuaryv1.AnnotationMACAddress, false), get(estuaryv1.AnnotationMACPool, true)
	retain, ttl := get(estuaryv1.AnnotationIPRetain, true), get(estuaryv1.AnnotationIPRetainTTL, true)
	if err != nil {
		return f, err
	}
	if v := addr; v != "" {
		if f.Addresses, err = f.parseEntry(estuaryv1.AnnotationIPAddress, v, ","); err != nil {
			return f, err
		}
	}
	if v := pool; v != "" {
		if f.Pool, err = f.parsePool(v); err != nil {
			return f, err
		}
	}
	if len(f.Addresses) > 0 && len(f.Pool) > 0 {
		return f, sel.deny(estuaryv1.AnnotationIPAddress, "is set together with %s; ask for one address or for a pool, not both", estuaryv1.AnnotationIPPool)
	}
	if v := mac; v != "" {
		if f.MAC, err = f.parseMAC(estuaryv1.AnnotationMACAddress, v, v); err != nil {
			return f, err
		}
	}
	if v := macPool; v != "" {
		if f.MACPool, err = f.parseMACPool(v); err != nil {
			return f, err
		}
	}
	if f.MAC != "" && len(f.MACPool) > 0 {
		return f, sel.deny(estuaryv1.AnnotationMACAddress, "is set together with %s; ask for one MAC or for a pool, not both", estuaryv1.AnnotationMACPool)
	}
	if err := f.parseRetention(retain, ttl); err != nil {
		return f, err
	}
	return f, nil
}

// parseEntry parses one address per family, separated by sep.
func (f *Fixed) parseEntry(key, v, sep string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, s := range strings.Split(v, sep) {
		s = strings.TrimSpace(s)
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, f.sel.deny(key, "%q: %q is not an IP address", v, s)
		}
		a = a.Unmap()
		for _, b := range out {
			if b.Is4() == a.Is4() {
				return nil, f.sel.deny(key, "%q names two %s addresses (%s and %s); name at most one per family", v, family.Of(a), b, a)
			}
		}
		out = append(out, a)
	}
	if len(out) == 2 && out[0].Is6() {
		out[0], out[1] = out[1], out[0]
	}
	return out, nil
}

func (f *Fixed) parsePool(v string) ([][]netip.Addr, error) {
	key := estuaryv1.AnnotationIPPool
	items := strings.Split(v, ",")
	if len(items) > MaxPoolEntries {
		return nil, f.sel.deny(key, "has %d entries; a pool may have at most %d", len(items), MaxPoolEntries)
	}
	seen := map[netip.Addr]int{}
	pool := make([][]netip.Addr, 0, len(items))
	for i, item := range items {
		entry, err := f.parseEntry(key, item, "/")
		var d *Denial
		if errors.As(err, &d) {
			return nil, f.sel.deny(key, "entry %d: %s", i, d.Reason)
		}
		if i > 0 && !sameFamilies(entry, pool[0]) {
			return nil, f.sel.deny(key, "mixes families: entry %d is %s but entry 0 is %s; every entry must name the same families",
				i, familiesOf(entry), familiesOf(pool[0]))
		}
		for _, a := range entry {
			if j, dup := seen[a]; dup {
				return nil, f.sel.deny(key, "names %s twice (entries %d and %d)", a, j, i)
			}
			seen[a] = i
		}
		pool = append(pool, entry)
	}
	return pool, nil
}

func sameFamilies(a, b []netip.Addr) bool {
	return familiesOf(a) == familiesOf(b)
}

func familiesOf(entry []netip.Addr) string {
	names := make([]string, len(entry))
	for i, a := range entry {
		names[i] = string(family.Of(a))
	}
	return strings.Join(names, "+")
}

// parseMAC accepts a unicast, non-zero 48-bit MAC and returns it in
// canonical (lower-case, colon) form.
func (f *Fixed) parseMAC(key, value, s string) (string, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(s))
	switch {
	case err != nil || len(hw) != 6:
		return "", f.sel.deny(key, "%q: %q is not a 48-bit MAC address", value, s)
	case hw[0]&1 != 0:
		return "", f.sel.deny(key, "%q: %s is a multicast MAC address; a pod's interface needs a unicast one", value, hw)
	case hw.String() == "00:00:00:00:00:00":
		return "", f.sel.deny(key, "%q: the zero MAC address cannot be an interface's", value)
	}
	return hw.String(), nil
}

func (f *Fixed) parseMACPool(v string) ([]string, error) {
	key := estuaryv1.AnnotationMACPool
	items := strings.Split(v, ",")
	if len(items) > MaxPoolEntries {
		return nil, f.sel.deny(key, "has %d entries; a pool may have at most %d", len(items), MaxPoolEntries)
	}
	seen := map[string]int{}
	out := make([]string, 0, len(items))
	for i, item := range items {
		mac, err := f.parseMAC(key, v, item)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[mac]; dup {
			return nil, f.sel.deny(key, "names %s twice (entries %d and %d)", mac, j, i)
		}
		seen[mac] = i
		out = append(out, mac)
	}
	return out, nil
}

func (f *Fixed) parseRetention(retain, ttl string) error {
	if retain != "" {
		b, err := strconv.ParseBool(retain)
		if err != nil || (retain != "true" && retain != "false") {
			return f.sel.deny(estuaryv1.AnnotationIPRetain, "%q is not true or false", retain)
		}
		f.Retain = &b
	}
	if ttl == "" {
		return nil
	}
	f.TTLSet, f.ttlText = true, ttl
	if ttl == estuaryv1.RetainNever {
		return nil
	}
	d, err := time.ParseDuration(ttl)
	if err != nil || d <= 0 {
		return f.sel.deny(estuaryv1.AnnotationIPRetainTTL, "%q is not a positive duration (e.g. 30m, 24h) or %s", ttl, estuaryv1.RetainNever)
	}
	f.TTL = &d
	return nil
}

// Place is where a fixed address lies: the subnet it would be assigned in.
type Place struct {
	Addr   netip.Addr
	Subnet string
}

// CheckAddresses checks every address the pod asks for against network n
// and subnets: each must be of a family the pod asks for, not a Node's
// address (c.Nodes), and lie, and be assignable (ipam.CheckAddr: not the
// network, broadcast or gateway address, not excluded, inside the subnet's
// start and end) and claimable by the pod's namespace (a private subnet's
// spec.namespaceSelector, for a reserved address its
// spec.reservedNamespaceSelector), in a subnet of n (one of the named
// subnets when the pod names some). It returns, per address, the subnet it
// lies in. Each subnet is parsed at most once (see Layouts).
func (f *Fixed) CheckAddresses(n *estuaryv1.Network, subnets []estuaryv1.Subnet, c Claims) (map[netip.Addr]string, error) {
	ix := c.Layouts.index(n.Name, f.sel.Subnets, subnets)
	places := make(map[netip.Addr]string, len(f.Addresses)+len(f.Pool)*2)
	fams := f.sel.Families()
	// check places a, entry i of the pool (-1: the ip-address annotation).
	check := func(i int, a netip.Addr) error {
		deny := func(format string, args ...any) error {
			key, what := estuaryv1.AnnotationIPAddress, "address"
			if i >= 0 {
				key, what = estuaryv1.AnnotationIPPool, fmt.Sprintf("entry %d:", i)
			}
			return f.sel.deny(key, "%s %s "+format, append([]any{what, a}, args...)...)
		}
		if fams != nil && !containsFamily(fams, family.Of(a)) {
			return deny("is %s, but %s asks for %s only", family.Of(a), estuaryv1.AnnotationIPFamily, f.sel.IPFamily)
		}
		if na, ok := c.Nodes[a]; ok {
			return deny("is the %s of node %q; a node's address is never given to a pod", na.Type, na.Node)
		}
		subnet, err := f.placeOf(a, n, ix)
		if err != nil {
			return deny("%s", err)
		}
		places[a] = subnet
		return nil
	}
	for _, a := range f.Addresses {
		if err := check(-1, a); err != nil {
			return nil, err
		}
	}
	for i, entry := range f.Pool {
		for _, a := range entry {
			if err := check(i, a); err != nil {
				return nil, err
			}
		}
	}
	return places, nil
}

func containsFamily(fams []family.Family, f family.Family) bool {
	for _, g := range fams {
		if g == f {
			return true
		}
	}
	return false
}

// placeOf returns the subnet of ix (network n's, restricted to the
// selection's named subnets, if any) that a is assignable and claimable
// in, or why there is none.
func (f *Fixed) placeOf(a netip.Addr, n *estuaryv1.Network, ix *subnetIndex) (string, error) {
	var place string
	var refusal error
	ix.holding(a, func(l *layout) bool {
		if err := f.assignable(l, a); err != nil {
			refusal = err
			return true
		}
		place = l.name
		return false
	})
	switch {
	case place != "":
		return place, nil
	case refusal != nil:
		return "", refusal
	case len(f.sel.Subnets) > 0:
		return "", fmt.Errorf("is outside every subnet named by %s (%s)", estuaryv1.AnnotationSubnet, strings.Join(f.sel.Subnets, ","))
	}
	return "", fmt.Errorf("is outside every subnet of %s %q", KindNetwork, n.Name)
}

// assignable says why a, inside subnet l's prefix, cannot be given to the
// pod in l, or nil.
func (f *Fixed) assignable(l *layout, a netip.Addr) error {
	if l.check == nil {
		return fmt.Errorf("cannot be assigned: %w", l.err)
	}
	if err := l.check.Check(a); err != nil {
		return fmt.Errorf("cannot be assigned: %w", err)
	}
	return f.claimable(l, a)
}

// DenyHeld is the denial of an address the pod asks for that another
// workload holds.
func (f *Fixed) DenyHeld(a netip.Addr, holder, phase string) *Denial {
	key := estuaryv1.AnnotationIPAddress
	if len(f.Pool) > 0 {
		key = estuaryv1.AnnotationIPPool
	}
	return f.sel.deny(key, "address %s is %s by %s; it can be given only to a pod of that workload", a, phase, holder)
}

// DenyMAC is the denial of a MAC annotation.
func (f *Fixed) DenyMAC(format string, args ...any) *Denial {
	key := estuaryv1.AnnotationMACAddress
	if len(f.MACPool) > 0 {
		key = estuaryv1.AnnotationMACPool
	}
	return f.sel.deny(key, format, args...)
}

// Deny is a denial of the annotation that named the fixed addresses.
func (f *Fixed) Deny(format string, args ...any) *Denial {
	key := estuaryv1.AnnotationIPAddress
	if len(f.Pool) > 0 {
		key = estuaryv1.AnnotationIPPool
	}
	return f.sel.deny(key, format, args...)
}
