package lab

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
)

// Every address range and name prefix of the lab lives in this file, so a clash with
// a site's own networks is fixed in one place.
const (
	// Prefix starts the name of every network namespace, cgroup and veth the lab
	// creates; cleanup finds leftovers by it even without a state file.
	Prefix = "estlab"

	// SwitchCIDR is the untagged underlay segment every node and the router plug into.
	SwitchCIDR = "10.77.0.0/24"
	// ExternalCIDR is the link between the router and the external host.
	ExternalCIDR = "10.77.250.0/24"
	// UnderlayCIDR is a second subnet on the switch for underlay pod networks; the
	// router holds its first address, the gateway of such networks.
	UnderlayCIDR = "10.77.100.0/24"
	// BGPCIDR is the pod subnet of BGP underlay networks: on no link, the
	// router learns each pod address from the node that holds it.
	BGPCIDR = "10.77.200.0/24"
	// PodCIDR is the cluster pod range; node i gets PodCIDR's i-th /24.
	PodCIDR = "10.78.0.0/16"
	// ServiceCIDR is the ClusterIP range.
	ServiceCIDR = "10.79.0.0/16"

	// RouterASN is the BGP autonomous system of the router.
	RouterASN = 64512
	// NodeASN is the AS number the router expects of every node: the netID of
	// a BGP network that peers with it.
	NodeASN = 64600
	// APIServerPort is the secure port of kube-apiserver inside the control-plane namespace.
	APIServerPort = 6443
	// DefaultHostAPIPort is where the lab forwards the API server on the host's
	// loopback. It lies below Linux's ephemeral port range (32768-60999), so
	// an outgoing connection on loopback can never hold it when the lab starts.
	DefaultHostAPIPort = 16443
	// MaxNodes bounds --nodes (node addresses are .11 to .11+MaxNodes-1 on the switch).
	MaxNodes = 20
)

// The IPv6 ranges of a dual-stack or IPv6-only lab, each the IPv6 twin of the
// IPv4 range above: a member's IPv6 address ends in the same digits as its
// IPv4 one (node-1 is 10.77.0.11 and fd77::11), so either names it.
const (
	SwitchCIDR6   = "fd77::/64"
	ExternalCIDR6 = "fd77:250::/64"
	UnderlayCIDR6 = "fd77:100::/64"
	BGPCIDR6      = "fd77:200::/64"
	// PodCIDR6 is the IPv6 pod range; node i gets its i-th /64 (fd78:0:0:i::/64),
	// and estuary's IPv6 overlay subnet is its first /64 (fd78::/64).
	PodCIDR6 = "fd78::/48"
	// ServiceCIDR6 is the IPv6 ClusterIP range (kube-apiserver takes at most
	// 20 bits of host part here).
	ServiceCIDR6 = "fd79::/112"
)

// IP families of a lab (--ip-family).
const (
	FamilyIPv4 = "ipv4"
	FamilyDual = "dual" // IPv4 first, IPv6 second, as Kubernetes orders a dual-stack cluster
	FamilyIPv6 = "ipv6"
)

// ValidFamily reports whether f is a lab IP family; "" means ipv4.
func ValidFamily(f string) error {
	switch f {
	case "", FamilyIPv4, FamilyDual, FamilyIPv6:
		return nil
	}
	return fmt.Errorf("--ip-family %q: want ipv4, dual or ipv6", f)
}

// Member is one network namespace of the lab plugged into the switch or the router.
type Member struct {
	Name    string     // logical name: control-plane, router, node-1, external
	NetNS   string     // network namespace name (Prefix-...)
	Addr    netip.Addr // address on the switch (or on the external link)
	PodCIDR netip.Prefix
	Port    string // veth end in the switch (or router) namespace
}

// Plan is the address and naming plan of one lab, for its first IP family (the
// one Kubernetes lists first: IPv4 unless the lab is IPv6-only). A dual-stack
// lab's IPv6 addresses are in Secondary, a plan of the same members.
type Plan struct {
	Family       string // ipv4, dual or ipv6
	Secondary    *Plan  // the IPv6 plan of a dual-stack lab; nil otherwise
	Nodes        []Member
	ControlPlane Member
	Router       Member
	External     Member
	SwitchNS     string
	Switch       netip.Prefix
	ExternalNet  netip.Prefix
	RouterExt    netip.Addr // router address on the external link
	Underlay     netip.Prefix
	RouterUnder  netip.Addr // router address in Underlay, on its switch port
	Pods         netip.Prefix
	Services     netip.Prefix
	APIService   netip.Addr // first service address (kubernetes.default)
	DNSService   netip.Addr
}

// NewPlan computes the IPv4 plan for n nodes.
func NewPlan(n int) (*Plan, error) { return NewFamilyPlan(n, FamilyIPv4) }

// NewFamilyPlan computes the plan for n nodes of the IP family fam.
func NewFamilyPlan(n int, fam string) (*Plan, error) {
	if err := ValidFamily(fam); err != nil {
		return nil, err
	}
	if n < 1 || n > MaxNodes {
		return nil, fmt.Errorf("node count %d out of range 1..%d", n, MaxNodes)
	}
	switch fam {
	case FamilyIPv6:
		p := newPlan6(n)
		p.Family = FamilyIPv6
		return p, nil
	case FamilyDual:
		p := newPlan4(n)
		p.Family, p.Secondary = FamilyDual, newPlan6(n)
		p.Secondary.Family = FamilyDual
		return p, nil
	}
	p := newPlan4(n)
	p.Family = FamilyIPv4
	return p, nil
}

func newPlan4(n int) *Plan {
	sw := netip.MustParsePrefix(SwitchCIDR)
	ext := netip.MustParsePrefix(ExternalCIDR)
	p := &Plan{
		SwitchNS:    Prefix + "-switch",
		Switch:      sw,
		ExternalNet: ext,
		Underlay:    netip.MustParsePrefix(UnderlayCIDR),
		Pods:        netip.MustParsePrefix(PodCIDR),
		Services:    netip.MustParsePrefix(ServiceCIDR),
	}
	p.Router = Member{Name: "router", NetNS: Prefix + "-router", Addr: nth(sw.Addr(), 1), Port: Prefix + "-rt"}
	p.ControlPlane = Member{Name: "control-plane", NetNS: Prefix + "-cp", Addr: nth(sw.Addr(), 2), Port: Prefix + "-cp"}
	p.RouterExt = nth(ext.Addr(), 1)
	p.RouterUnder = nth(p.Underlay.Addr(), 1)
	p.External = Member{Name: "external", NetNS: Prefix + "-external", Addr: nth(ext.Addr(), 10), Port: Prefix + "-ext"}
	p.APIService = nth(p.Services.Addr(), 1)
	p.DNSService = nth(p.Services.Addr(), 10)
	for i := 1; i <= n; i++ {
		p.Nodes = append(p.Nodes, Member{
			Name:    fmt.Sprintf("node-%d", i),
			NetNS:   fmt.Sprintf("%s-node-%d", Prefix, i),
			Addr:    nth(sw.Addr(), 10+i),
			PodCIDR: netip.PrefixFrom(nth(p.Pods.Addr(), i*256), 24),
			Port:    fmt.Sprintf("%s-n%d", Prefix, i),
		})
	}
	return p
}

// newPlan6 is the IPv6 twin of newPlan4: the same members, names and ports.
func newPlan6(n int) *Plan {
	p := newPlan4(n)
	p.Switch = netip.MustParsePrefix(SwitchCIDR6)
	p.ExternalNet = netip.MustParsePrefix(ExternalCIDR6)
	p.Underlay = netip.MustParsePrefix(UnderlayCIDR6)
	p.Pods = netip.MustParsePrefix(PodCIDR6)
	p.Services = netip.MustParsePrefix(ServiceCIDR6)
	p.Router.Addr = twin(p.Switch, 1)
	p.ControlPlane.Addr = twin(p.Switch, 2)
	p.RouterExt = twin(p.ExternalNet, 1)
	p.RouterUnder = twin(p.Underlay, 1)
	p.External.Addr = twin(p.ExternalNet, 10)
	p.APIService = twin(p.Services, 1)
	p.DNSService = twin(p.Services, 10)
	for i := range p.Nodes {
		p.Nodes[i].Addr = twin(p.Switch, 10+i+1)
		b := p.Pods.Addr().As16()
		b[6], b[7] = byte((i+1)>>8), byte(i+1)
		p.Nodes[i].PodCIDR = netip.PrefixFrom(netip.AddrFrom16(b), 64)
	}
	return p
}

// twin is the IPv6 address of prefix whose last group reads as the decimal
// n: twin(fd77::/64, 11) is fd77::11.
func twin(prefix netip.Prefix, n int) netip.Addr {
	return netip.MustParseAddr(fmt.Sprintf("%s%d", prefix.Addr(), n))
}

// Stacks is the plan of each of the lab's IP families, the first family first.
func (p *Plan) Stacks() []*Plan {
	if p.Secondary != nil {
		return []*Plan{p, p.Secondary}
	}
	return []*Plan{p}
}

// IPv6 reports whether this plan's addresses are IPv6.
func (p *Plan) IPv6() bool { return p.Switch.Addr().Is6() }

// joined is f of every stack, comma-separated, the form Kubernetes takes for
// dual-stack flags (--node-ip, --service-cluster-ip-range, --cluster-cidr).
func (p *Plan) joined(f func(*Plan) string) string {
	var out []string
	for _, s := range p.Stacks() {
		out = append(out, f(s))
	}
	return strings.Join(out, ",")
}

// NodeIPs is the node's addresses on the switch, one per family, first family first.
func (p *Plan) NodeIPs(name string) []netip.Addr {
	var out []netip.Addr
	for _, s := range p.Stacks() {
		if m, ok := s.Node(name); ok {
			out = append(out, m.Addr)
		}
	}
	return out
}

// NodePodCIDRs is the node's pod CIDRs, one per family, first family first.
func (p *Plan) NodePodCIDRs(name string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range p.Stacks() {
		if m, ok := s.Node(name); ok {
			out = append(out, m.PodCIDR)
		}
	}
	return out
}

// anyAddr is the wildcard address a server of the lab binds: "::" (every
// address of both families) once the lab has IPv6.
func (p *Plan) anyAddr() string {
	if p.Family == FamilyIPv4 {
		return "0.0.0.0"
	}
	return "::"
}

// nodeIPFlag is kubelet's --node-ip for the node: its address of every family.
func (p *Plan) nodeIPFlag(name string) string {
	var out []string
	for _, a := range p.NodeIPs(name) {
		out = append(out, a.String())
	}
	return strings.Join(out, ",")
}

// OverlaySubnet is the subnet the lab gives estuary's default overlay network
// in this family: the whole IPv4 pod range, or the first /64 of the IPv6 one.
func (p *Plan) OverlaySubnet() netip.Prefix {
	if p.IPv6() {
		return netip.PrefixFrom(p.Pods.Addr(), 64)
	}
	return p.Pods
}

// Members lists every namespace plugged into the switch.
func (p *Plan) Members() []Member {
	return append([]Member{p.Router, p.ControlPlane}, p.Nodes...)
}

// Node returns the node named name.
func (p *Plan) Node(name string) (Member, bool) {
	for _, n := range p.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Member{}, false
}

// APIServerURL is the API server's address as seen from inside the lab.
func (p *Plan) APIServerURL() string {
	return "https://" + netip.AddrPortFrom(p.ControlPlane.Addr, APIServerPort).String()
}

func nth(base netip.Addr, n int) netip.Addr {
	b := base.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Paths are the locations of everything the lab writes under its state directory.
type Paths struct{ Root string }

// StateFile is the lab's record (state.json).
func (p Paths) StateFile() string { return filepath.Join(p.Root, "state.json") }

// Kubeconfig is the admin kubeconfig that works from the host.
func (p Paths) Kubeconfig() string { return filepath.Join(p.Root, "kubeconfig") }

// PKI holds the CA, certificates and ServiceAccount keys.
func (p Paths) PKI() string { return filepath.Join(p.Root, "pki") }

// Logs holds one log file per component.
func (p Paths) Logs() string { return filepath.Join(p.Root, "logs") }

// Run holds one pid file per component.
func (p Paths) Run() string { return filepath.Join(p.Root, "run") }

// ControlPlane holds etcd's data and the control plane's kubeconfigs.
func (p Paths) ControlPlane() string { return filepath.Join(p.Root, "control-plane") }

// Router holds the BIRD configuration and control socket.
func (p Paths) Router() string { return filepath.Join(p.Root, "router") }

// Node is a node's directory: its configuration and the sources of its mounts.
func (p Paths) Node(name string) string { return filepath.Join(p.Root, "nodes", name) }

// Log is the log file of one component.
func (p Paths) Log(component string) string { return filepath.Join(p.Logs(), component+".log") }
