package podipam

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/pkg/ipam"
)

// Selection is what a pod asks for: a network, optionally explicit subnets,
// and the address families.
type Selection struct {
	Network  string
	Subnets  []string
	Families []ipam.Family
}

// selectionFrom reads the pod's annotations, falling back to its namespace's
// for each key the pod does not set. Empty fields mean "default".
func selectionFrom(pod *corev1.Pod, ns *corev1.Namespace) (Selection, error) {
	get := func(key string) (string, string) {
		if v, ok := pod.Annotations[key]; ok {
			return v, "pod " + pod.Namespace + "/" + pod.Name
		}
		if ns != nil {
			if v, ok := ns.Annotations[key]; ok {
				return v, "namespace " + ns.Name
			}
		}
		return "", ""
	}
	var sel Selection
	if v, from := get(estuaryv1.AnnotationNetwork); v != "" {
		if err := validName(v); err != nil {
			return sel, fmt.Errorf("%s: annotation %s: %w", from, estuaryv1.AnnotationNetwork, err)
		}
		sel.Network = v
	}
	if v, from := get(estuaryv1.AnnotationSubnet); v != "" {
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			if err := validName(name); err != nil {
				return sel, fmt.Errorf("%s: annotation %s: %w", from, estuaryv1.AnnotationSubnet, err)
			}
			sel.Subnets = append(sel.Subnets, name)
		}
		if len(sel.Subnets) > 2 {
			return sel, fmt.Errorf("%s: annotation %s: at most one subnet per family, got %d", from, estuaryv1.AnnotationSubnet, len(sel.Subnets))
		}
	}
	if v, from := get(estuaryv1.AnnotationIPFamily); v != "" {
		fams, err := parseFamily(v)
		if err != nil {
			return sel, fmt.Errorf("%s: annotation %s: %w", from, estuaryv1.AnnotationIPFamily, err)
		}
		sel.Families = fams
	}
	return sel, nil
}

func parseFamily(v string) ([]ipam.Family, error) {
	switch v {
	case estuaryv1.IPFamilyIPv4:
		return []ipam.Family{ipam.IPv4}, nil
	case estuaryv1.IPFamilyIPv6:
		return []ipam.Family{ipam.IPv6}, nil
	case estuaryv1.IPFamilyDualStack:
		return []ipam.Family{ipam.IPv4, ipam.IPv6}, nil
	}
	return nil, fmt.Errorf("%q is not one of %s, %s, %s", v, estuaryv1.IPFamilyIPv4, estuaryv1.IPFamilyIPv6, estuaryv1.IPFamilyDualStack)
}

// validName accepts a Kubernetes object name (DNS subdomain).
func validName(s string) error {
	if s == "" || len(s) > 253 {
		return fmt.Errorf("%q is not a valid object name", s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		inner := (c == '-' || c == '.') && i > 0 && i < len(s)-1
		if !alnum && !inner {
			return fmt.Errorf("%q is not a valid object name", s)
		}
	}
	return nil
}

// request turns a selection into an allocator request, resolving defaults
// against what the allocator knows: the overlay network when none is named,
// and every family the network has public subnets for when none is asked.
func request(sel Selection, owner, overlay string, view subnetView) (ipam.Request, error) {
	req := ipam.Request{Owner: owner, Network: sel.Network, Families: sel.Families}
	if len(sel.Subnets) > 0 {
		req.Subnets = map[ipam.Family]string{}
		for _, name := range sel.Subnets {
			cfg, err := view.Subnet(name)
			if err != nil {
				return req, fmt.Errorf("requested %w", err)
			}
			f := familyOf(cfg.Prefix.Addr())
			if _, dup := req.Subnets[f]; dup {
				return req, fmt.Errorf("subnets %v name two %s subnets", sel.Subnets, f)
			}
			if req.Network != "" && cfg.Network != req.Network {
				return req, fmt.Errorf("subnet %q belongs to network %q, not %q", name, cfg.Network, req.Network)
			}
			req.Network = cfg.Network
			req.Subnets[f] = name
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
func publicFamilies(view subnetView, network string) []ipam.Family {
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
	var fams []ipam.Family
	if has4 {
		fams = append(fams, ipam.IPv4)
	}
	if has6 {
		fams = append(fams, ipam.IPv6)
	}
	return fams
}

func familyOf(a netip.Addr) ipam.Family {
	if a.Is4() {
		return ipam.IPv4
	}
	return ipam.IPv6
}
