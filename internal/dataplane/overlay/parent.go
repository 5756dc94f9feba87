package overlay

import (
	"fmt"
	"net/netip"
	"regexp"

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/pkg/family"
)

// ParentSpec chooses the VXLAN device's parent link: by Name, else by the
// first link (in index order) whose name matches Regex and that has a global
// unicast address, else (both empty) the link of the default route (IPv4,
// else IPv6).
type ParentSpec struct {
	Name  string
	Regex string
}

func (s ParentSpec) String() string {
	switch {
	case s.Name != "":
		return fmt.Sprintf("parent %q", s.Name)
	case s.Regex != "":
		return fmt.Sprintf("parent matching %q", s.Regex)
	default:
		return "parent of the default route"
	}
}

// Parent is a resolved parent link: its name, its first global unicast
// address (the VTEP address), its MTU, and all its global unicast addresses
// with their prefix lengths (IPv4 first).
type Parent struct {
	Link     string
	IP       netip.Addr
	MTU      int
	Prefixes []netip.Prefix
}

// ResolveParent finds the link spec names and its VTEP address.
func (a *Agent) ResolveParent(spec ParentSpec) (Parent, error) {
	la, err := a.findParent(spec)
	if err != nil {
		return Parent{}, fmt.Errorf("resolve %s: %w", spec, err)
	}
	if len(la.Addrs) == 0 {
		return Parent{}, fmt.Errorf("resolve %s: link %s has no global unicast address", spec, la.Name)
	}
	return Parent{Link: la.Name, IP: la.Addrs[0], MTU: la.MTU, Prefixes: la.Prefixes}, nil
}

func (a *Agent) findParent(spec ParentSpec) (ops.LinkAddrs, error) {
	if spec.Name != "" {
		return a.h.Addrs().OfLink(spec.Name)
	}
	if spec.Regex != "" {
		re, err := regexp.Compile(spec.Regex)
		if err != nil {
			return ops.LinkAddrs{}, fmt.Errorf("compile: %w", err)
		}
		ls, err := a.h.Addrs().ByLink()
		if err != nil {
			return ops.LinkAddrs{}, err
		}
		for _, la := range ls {
			if re.MatchString(la.Name) && len(la.Addrs) > 0 {
				return la, nil
			}
		}
		return ops.LinkAddrs{}, fmt.Errorf("no link matches with a global unicast address")
	}
	for _, f := range []family.Family{family.IPv4, family.IPv6} {
		name, err := a.h.Routes().DefaultLink(f)
		if err != nil {
			return ops.LinkAddrs{}, err
		}
		if name != "" {
			return a.h.Addrs().OfLink(name)
		}
	}
	return ops.LinkAddrs{}, fmt.Errorf("no default route")
}

// LinkExists says whether the host has a link named name, with or without
// addresses.
func (a *Agent) LinkExists(name string) bool {
	_, err := a.h.Addrs().OfLink(name)
	return err == nil
}
