package lab

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/estuary-cni/estuary/test/infra/lab/netlab"
)

const switchBridge = "br0"

func (p *Plan) nodeNamespaces() []string {
	var out []string
	for _, n := range p.Nodes {
		out = append(out, n.NetNS)
	}
	return out
}

// namespaces lists every network namespace of the plan.
func (p *Plan) namespaces() []string {
	ns := []string{p.SwitchNS, p.Router.NetNS, p.ControlPlane.NetNS, p.External.NetNS}
	for _, n := range p.Nodes {
		ns = append(ns, n.NetNS)
	}
	return ns
}

// buildNetwork creates the switch, plugs every member into it, gives the router the
// gateway address of the underlay pod subnet on its switch port, links the external
// host behind the router and installs addresses, routes and sysctls, for every IP
// family of the lab.
func (l *Lab) buildNetwork() error {
	pl := l.plan
	for _, ns := range pl.namespaces() {
		if err := netlab.Create(ns); err != nil {
			return err
		}
	}
	if err := netlab.Bridge(pl.SwitchNS, switchBridge); err != nil {
		return err
	}
	for _, m := range pl.Members() {
		if err := netlab.Veth(pl.SwitchNS, m.Port, switchBridge, m.NetNS, "eth0"); err != nil {
			return err
		}
	}
	if err := netlab.Veth(pl.Router.NetNS, "ext0", "", pl.External.NetNS, "eth0"); err != nil {
		return err
	}
	if err := l.sysctls(); err != nil {
		return err
	}
	for _, st := range pl.Stacks() {
		if err := st.addresses(); err != nil {
			return err
		}
	}
	if l.opts.CNI == "bridge" {
		return l.podRoutes()
	}
	return l.controlPlaneToOverlay()
}

// addresses gives every member its address of this plan's family on the
// switch, the router its underlay gateway and external link address, and the
// control plane, the nodes and the external host their default route.
func (p *Plan) addresses() error {
	pl := p
	for _, m := range pl.Members() {
		if err := netlab.AddAddr(m.NetNS, "eth0", netip.PrefixFrom(m.Addr, pl.Switch.Bits())); err != nil {
			return err
		}
	}
	if err := netlab.AddAddr(pl.Router.NetNS, "eth0", netip.PrefixFrom(pl.RouterUnder, pl.Underlay.Bits())); err != nil {
		return err
	}
	bits := pl.ExternalNet.Bits()
	if err := netlab.AddAddr(pl.Router.NetNS, "ext0", netip.PrefixFrom(pl.RouterExt, bits)); err != nil {
		return err
	}
	if err := netlab.AddAddr(pl.External.NetNS, "eth0", netip.PrefixFrom(pl.External.Addr, bits)); err != nil {
		return err
	}
	if err := netlab.Route(pl.External.NetNS, netip.Prefix{}, pl.RouterExt); err != nil {
		return err
	}
	for _, m := range append([]Member{pl.ControlPlane}, pl.Nodes...) {
		if err := netlab.Route(m.NetNS, netip.Prefix{}, pl.Router.Addr); err != nil {
			return err
		}
	}
	return nil
}

// controlPlaneToOverlay lets the API server reach overlay pod addresses (the
// proxy subresources, webhooks served by pods), as a kubeadm control plane
// that is itself a node of the overlay does. The control plane routes the pod
// range to the first node (its gateway into the overlay), which carries the
// packet through the tunnel to the pod's node, masquerading it behind its own
// address. Without the masquerade the pod's reply would go straight back over
// the switch, the gateway node would see a connection's SYN and never its
// SYN-ACK, and its conntrack would drop the rest as invalid; with it, the
// reply comes back through the tunnel (estuary's table 1002 routes node
// addresses there) and the gateway node un-NATs it. The lab's table is its own
// ("estlab"); estuary's rules are untouched. Underlay pod subnets need
// nothing: the control plane reaches them through the router. Each IP family
// gets its route and its rule.
func (l *Lab) controlPlaneToOverlay() error {
	var rules strings.Builder
	for _, pl := range l.plan.Stacks() {
		gw := pl.Nodes[0]
		if err := netlab.Route(pl.ControlPlane.NetNS, pl.Pods, gw.Addr); err != nil {
			return fmt.Errorf("control plane route to the overlay: %w", err)
		}
		fam := "ip"
		if pl.IPv6() {
			fam = "ip6"
		}
		fmt.Fprintf(&rules, "table %s %s {\n chain postrouting {\n  type nat hook postrouting priority srcnat + 10;\n"+
			"  %s saddr %s %s daddr %s masquerade\n }\n}\n", fam, Prefix, fam, pl.ControlPlane.Addr, fam, pl.Pods)
	}
	gw := l.plan.Nodes[0]
	if err := netlab.Nft(gw.NetNS, rules.String()); err != nil {
		return fmt.Errorf("control plane gateway on %s: %w", gw.Name, err)
	}
	return nil
}

func (l *Lab) sysctls() error {
	pl := l.plan
	set := map[string][][2]string{
		pl.Router.NetNS: {{"net.ipv4.ip_forward", "1"}},
	}
	for _, n := range pl.Nodes {
		set[n.NetNS] = [][2]string{
			{"net.ipv4.ip_forward", "1"},
			{"net.bridge.bridge-nf-call-iptables", "1"},
			{"net.bridge.bridge-nf-call-ip6tables", "1"},
		}
	}
	if pl.Family != FamilyIPv4 {
		for _, ns := range append([]string{pl.Router.NetNS}, pl.nodeNamespaces()...) {
			set[ns] = append(set[ns], [2]string{"net.ipv6.conf.all.forwarding", "1"})
		}
	}
	for ns, kvs := range set {
		for _, kv := range kvs {
			if err := netlab.Sysctl(ns, kv[0], kv[1]); err != nil {
				return err
			}
		}
	}
	return nil
}

// podRoutes makes every node's pod CIDR reachable over the switch: from the router
// (so the external host reaches pod IPs directly), the control plane and every
// other node.
func (l *Lab) podRoutes() error {
	for _, pl := range l.plan.Stacks() {
		if err := pl.podRoutes(); err != nil {
			return err
		}
	}
	return nil
}

func (p *Plan) podRoutes() error {
	pl := p
	for _, dst := range pl.Nodes {
		from := []string{pl.Router.NetNS, pl.ControlPlane.NetNS}
		for _, n := range pl.Nodes {
			if n.Name != dst.Name {
				from = append(from, n.NetNS)
			}
		}
		for _, ns := range from {
			if err := netlab.Route(ns, dst.PodCIDR, dst.Addr); err != nil {
				return fmt.Errorf("pod route to %s: %w", dst.Name, err)
			}
		}
	}
	return nil
}
