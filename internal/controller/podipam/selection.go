package podipam

import (
	"fmt"
	"slices"

	"github.com/estuary-cni/estuary/internal/netmodel"
	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

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
