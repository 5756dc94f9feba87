package migrate

// Subnets: the range carries over with its version as an integer and every
// address in canonical form; the lists of reserved and excluded addresses
// (single addresses in hybridnet) are folded into ranges, since estuary
// takes at most 32 entries. hybridnet hands a reserved address to any pod
// that names it, so a subnet with reserved addresses gets
// reservedNamespaceSelector {} (every namespace). autoNatOutgoing, which
// hybridnet applies only to VXLAN subnets (default on), becomes an explicit
// natOutgoing: its value on an Overlay subnet, false on an Underlay one. A
// subnet whose reserved or excluded addresses cannot all be kept is left
// out: writing it with fewer exclusions would hand out addresses hybridnet
// never did.

import (
	"fmt"
	"net/netip"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/webhook"
	"github.com/estuary-cni/estuary/pkg/family"
)

// maxRangeEntries is how many entries reservedIPs and excludeIPs take.
const maxRangeEntries = 32

func (t *translator) subnet(u *unstructured.Unstructured) {
	obj := objectName("Subnet", u)
	var hn hnSubnet
	unknown, err := decodeSpec(u, subnetShape, &hn)
	if err != nil {
		t.out.Report.skip(obj, "", "cannot be read: %v", err)
		return
	}
	n := t.networks[hn.Network]
	if n == nil {
		t.out.Report.skip(obj, "", "its network %q is not migrated", hn.Network)
		return
	}
	for _, f := range unknown {
		t.out.Report.skip(obj, f, "a field kubectl estuary migrate does not know; not migrated")
	}
	s := &estuaryv1.Subnet{ObjectMeta: objectMeta(u.GetName()), Spec: estuaryv1.SubnetSpec{Network: n.Name}}
	s.SetGroupVersionKind(estuaryv1.GroupVersion.WithKind("Subnet"))
	if why := subnetRange(&hn, &s.Spec.Range); why != "" {
		t.out.Report.skip(obj, "", "%s", why)
		return
	}
	if len(s.Spec.Range.ReservedIPs) > 0 {
		s.Spec.ReservedNamespaceSelector = &metav1.LabelSelector{}
		t.out.Report.note(obj, "spec.range.reservedIPs",
			"hybridnet gives a reserved address to any pod that names it: reservedNamespaceSelector {} lets every namespace's pods do so in estuary; narrow it as you need")
	}
	t.subnetConfig(obj, &hn, n, s)
	if err := webhook.ValidateSubnet(s, t.allNetworks(""), t.allSubnets()); err != nil {
		t.out.Report.skip(obj, "", "estuary's admission webhook would refuse it: %v", err)
		return
	}
	t.subnets[s.Name] = s
	t.out.Subnets = append(t.out.Subnets, s)
}

// subnetConfig carries hybridnet's netID and config over to s, reporting
// what has no estuary meaning.
func (t *translator) subnetConfig(obj string, hn *hnSubnet, n *estuaryv1.Network, s *estuaryv1.Subnet) {
	if id := hn.NetID; id != nil {
		switch {
		case n.Spec.Mode == estuaryv1.NetworkModeVLAN && *id >= 0 && *id <= maxVLAN:
			s.Spec.NetID = ptr.To(int64(*id))
		case n.Spec.NetID != nil && int64(*id) == *n.Spec.NetID:
			// The network's own netID: nothing to override.
		default:
			t.out.Report.skip(obj, "spec.netID", "%d: estuary lets only a VLAN network's subnets override its VLAN id (0 to %d)", *id, maxVLAN)
		}
	}
	overlay := n.Spec.Type == estuaryv1.NetworkTypeOverlay
	s.Spec.NATOutgoing = ptr.To(overlay)
	c := hn.Config
	if c == nil {
		return
	}
	if c.AutoNatOutgoing != nil {
		if overlay {
			s.Spec.NATOutgoing = ptr.To(*c.AutoNatOutgoing)
		} else if *c.AutoNatOutgoing {
			t.out.Report.note(obj, "spec.config.autoNatOutgoing", "true has no effect on an Underlay subnet in hybridnet; natOutgoing is false")
		}
	}
	s.Spec.Private = ptr.Deref(c.Private, false)
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"gatewayType", c.GatewayType != ""}, {"gatewayNode", c.GatewayNode != ""}, {"allowSubnets", len(c.AllowSubnets) > 0},
	} {
		if f.set {
			t.out.Report.skip(obj, "spec.config."+f.name, "estuary has no equivalent; not migrated")
		}
	}
}

// subnetRange fills r from hybridnet's range, or says why it cannot be.
func subnetRange(hn *hnSubnet, r *estuaryv1.AddressRange) string {
	p, err := netip.ParsePrefix(hn.Range.CIDR)
	switch {
	case err != nil:
		return fmt.Sprintf("spec.range.cidr %q is not a CIDR", hn.Range.CIDR)
	case p.Masked() != p:
		return fmt.Sprintf("spec.range.cidr %s is not in canonical form (%s)", hn.Range.CIDR, p.Masked())
	case p.Addr().Is4() && p.Bits() > 30:
		return fmt.Sprintf("spec.range.cidr %s: estuary's IPv4 subnets are /30 or larger", p)
	case p.Addr().Is6() && (p.Bits() < 64 || p.Bits() > 127):
		return fmt.Sprintf("spec.range.cidr %s: estuary's IPv6 subnets are /64 to /127", p)
	}
	r.CIDR = p.String()
	r.Version = int32(family.Of(p.Addr()).Version())
	if v := hn.Range.Version; v != "" && v != fmt.Sprint(r.Version) {
		return fmt.Sprintf("spec.range.version %q does not match cidr %s", v, p)
	}
	for _, f := range []struct {
		name, text string
		dst        *estuaryv1.IPAddress
	}{{"start", hn.Range.Start, &r.Start}, {"end", hn.Range.End, &r.End}, {"gateway", hn.Range.Gateway, &r.Gateway}} {
		if f.text == "" {
			continue
		}
		a, err := netip.ParseAddr(f.text)
		if err != nil || !p.Contains(a) {
			return fmt.Sprintf("spec.range.%s %q is not an address of %s", f.name, f.text, p)
		}
		*f.dst = estuaryv1.IPAddress(a.String())
	}
	var why string
	if r.ReservedIPs, why = foldRanges("reservedIPs", hn.Range.ReservedIPs, p); why != "" {
		return why
	}
	if r.ExcludeIPs, why = foldRanges("excludeIPs", hn.Range.ExcludeIPs, p); why != "" {
		return why
	}
	return ""
}

// foldRanges turns a list of addresses of p into the fewest ranges
// ("a-b", or "a" alone), or says why it cannot.
func foldRanges(field string, list []string, p netip.Prefix) ([]estuaryv1.AddressOrRange, string) {
	addrs := make([]netip.Addr, 0, len(list))
	for _, s := range list {
		a, err := netip.ParseAddr(s)
		if err != nil || !p.Contains(a) {
			return nil, fmt.Sprintf("spec.range.%s: %q is not an address of %s", field, s, p)
		}
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	var out []estuaryv1.AddressOrRange
	for i := 0; i < len(addrs); {
		j := i
		for j+1 < len(addrs) && addrs[j].Next() == addrs[j+1] {
			j++
		}
		if i == j {
			out = append(out, estuaryv1.AddressOrRange(addrs[i].String()))
		} else {
			out = append(out, estuaryv1.AddressOrRange(addrs[i].String()+"-"+addrs[j].String()))
		}
		i = j + 1
	}
	if len(out) > maxRangeEntries {
		return nil, fmt.Sprintf("spec.range.%s: its %d addresses make %d ranges; estuary takes at most %d, and a subnet written with fewer would hand out addresses hybridnet does not",
			field, len(addrs), len(out), maxRangeEntries)
	}
	return out, ""
}

// allSubnets are the subnets a new one is checked against: the existing
// ones and those migrated so far.
func (t *translator) allSubnets() []estuaryv1.Subnet {
	var out []estuaryv1.Subnet
	for _, s := range t.in.Existing.Subnets {
		if t.subnets[s.Name] == nil {
			out = append(out, s)
		}
	}
	for _, s := range t.out.Subnets {
		out = append(out, *s)
	}
	return out
}
