package netmodel

import (
	"fmt"
	"net/netip"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// SubnetConfig translates a Subnet object into the allocator's terms. The
// CRD's CEL rules already guarantee the shapes; errors here name the field
// anyway, for objects written while validation was bypassed.
func SubnetConfig(sn *estuaryv1.Subnet) (ipam.SubnetConfig, error) {
	r := sn.Spec.Range
	cfg := ipam.SubnetConfig{Name: sn.Name, Network: sn.Spec.Network, Private: sn.Spec.Private}
	prefix, err := netip.ParsePrefix(r.CIDR)
	if err != nil {
		return cfg, fmt.Errorf("subnet %s: spec.range.cidr: %w", sn.Name, err)
	}
	cfg.Prefix = prefix
	for _, f := range []struct {
		field string
		text  estuaryv1.IPAddress
		dst   *netip.Addr
	}{
		{"start", r.Start, &cfg.Start}, {"end", r.End, &cfg.End}, {"gateway", r.Gateway, &cfg.Gateway},
	} {
		if f.text == "" {
			continue
		}
		if *f.dst, err = netip.ParseAddr(string(f.text)); err != nil {
			return cfg, fmt.Errorf("subnet %s: spec.range.%s: %w", sn.Name, f.field, err)
		}
	}
	if cfg.Reserved, err = ranges(sn.Name, "reservedIPs", r.ReservedIPs); err != nil {
		return cfg, err
	}
	if cfg.Excluded, err = ranges(sn.Name, "excludeIPs", r.ExcludeIPs); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func ranges(subnet, field string, in []estuaryv1.AddressOrRange) ([]ipam.Range, error) {
	out := make([]ipam.Range, 0, len(in))
	for i, s := range in {
		r, err := ipam.ParseRange(string(s))
		if err != nil {
			return nil, fmt.Errorf("subnet %s: spec.range.%s[%d]: %w", subnet, field, i, err)
		}
		out = append(out, r)
	}
	return out, nil
}
