package plugin

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/containernetworking/cni/pkg/types"
	types100 "github.com/containernetworking/cni/pkg/types/100"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
)

// ToResult converts the daemon's Add reply into a CNI 1.1 result.
func ToResult(r *cniv1.AddReply) (*types100.Result, error) {
	res := &types100.Result{CNIVersion: types100.ImplementedSpecVersion}
	for _, itf := range r.GetInterfaces() {
		res.Interfaces = append(res.Interfaces, &types100.Interface{
			Name: itf.GetName(), Mac: itf.GetMac(), Mtu: int(itf.GetMtu()), Sandbox: itf.GetSandbox(),
		})
	}
	for i, ip := range r.GetIps() {
		c, err := toIPConfig(ip, len(res.Interfaces))
		if err != nil {
			return nil, fmt.Errorf("ips[%d]: %w", i, err)
		}
		res.IPs = append(res.IPs, c)
	}
	for i, rt := range r.GetRoutes() {
		route, err := toRoute(rt)
		if err != nil {
			return nil, fmt.Errorf("routes[%d]: %w", i, err)
		}
		res.Routes = append(res.Routes, route)
	}
	if d := r.GetDns(); d != nil {
		res.DNS = types.DNS{Nameservers: d.GetNameservers(), Domain: d.GetDomain(), Search: d.GetSearch(), Options: d.GetOptions()}
	}
	return res, nil
}

func toIPConfig(ip *cniv1.IPConfig, interfaces int) (*types100.IPConfig, error) {
	addr, err := ipNet(ip.GetAddress())
	if err != nil {
		return nil, err
	}
	c := &types100.IPConfig{Address: addr}
	if ip.Interface != nil {
		idx := int(ip.GetInterface())
		if idx < 0 || idx >= interfaces {
			return nil, fmt.Errorf("interface index %d is outside the %d interfaces", idx, interfaces)
		}
		c.Interface = &idx
	}
	if c.Gateway, err = optionalIP(ip.GetGateway()); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return c, nil
}

func toRoute(rt *cniv1.Route) (*types.Route, error) {
	dst, err := ipNet(rt.GetDst())
	if err != nil {
		return nil, err
	}
	route := &types.Route{Dst: dst, MTU: int(rt.GetMtu()), AdvMSS: int(rt.GetAdvMss()), Priority: int(rt.GetPriority())}
	if route.GW, err = optionalIP(rt.GetGw()); err != nil {
		return nil, fmt.Errorf("gw: %w", err)
	}
	if rt.Table != nil {
		t := int(rt.GetTable())
		route.Table = &t
	}
	if rt.Scope != nil {
		s := int(rt.GetScope())
		route.Scope = &s
	}
	return route, nil
}

// ipNet parses "addr/len" keeping the host bits of addr.
func ipNet(s string) (net.IPNet, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return net.IPNet{}, fmt.Errorf("address: %w", err)
	}
	return net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}, nil
}

func optionalIP(s string) (net.IP, error) {
	if s == "" {
		return nil, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return nil, err
	}
	return a.AsSlice(), nil
}

// FromResult converts a prevResult into the protocol's form.
func FromResult(r types.Result) (*cniv1.AddReply, error) {
	res, err := types100.NewResultFromResult(r)
	if err != nil {
		return nil, fmt.Errorf("convert prevResult to %s: %w", types100.ImplementedSpecVersion, err)
	}
	out := &cniv1.AddReply{}
	for _, itf := range res.Interfaces {
		if itf == nil {
			continue
		}
		out.Interfaces = append(out.Interfaces, &cniv1.Interface{Name: itf.Name, Mac: itf.Mac, Mtu: clampU32(itf.Mtu), Sandbox: itf.Sandbox})
	}
	for _, ip := range res.IPs {
		if ip == nil {
			continue
		}
		out.Ips = append(out.Ips, fromIPConfig(ip))
	}
	return out, nil
}

func fromIPConfig(ip *types100.IPConfig) *cniv1.IPConfig {
	c := &cniv1.IPConfig{Address: prefixString(ip.Address)}
	if ip.Interface != nil && *ip.Interface >= 0 && *ip.Interface <= 1<<30 {
		idx := int32(*ip.Interface)
		c.Interface = &idx
	}
	if ip.Gateway != nil {
		c.Gateway = ip.Gateway.String()
	}
	return c
}

// prefixString formats an address with its prefix length, host bits kept.
func prefixString(n net.IPNet) string {
	ones, _ := n.Mask.Size()
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return n.String()
	}
	a = a.Unmap()
	p, err := a.Prefix(ones)
	if err != nil {
		return n.String()
	}
	return netip.PrefixFrom(a, p.Bits()).String()
}

func clampU32(v int) uint32 {
	if v < 0 {
		return 0
	}
	if v > 1<<31 {
		return 1 << 31
	}
	return uint32(v)
}
