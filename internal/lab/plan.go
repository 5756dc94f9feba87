package lab

import (
	"fmt"
	"net/netip"
	"path/filepath"
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

// Member is one network namespace of the lab plugged into the switch or the router.
type Member struct {
	Name    string     // logical name: control-plane, router, node-1, external
	NetNS   string     // network namespace name (Prefix-...)
	Addr    netip.Addr // address on the switch (or on the external link)
	PodCIDR netip.Prefix
	Port    string // veth end in the switch (or router) namespace
}

// Plan is the address and naming plan of one lab.
type Plan struct {
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

// NewPlan computes the plan for n nodes.
func NewPlan(n int) (*Plan, error) {
	if n < 1 || n > MaxNodes {
		return nil, fmt.Errorf("node count %d out of range 1..%d", n, MaxNodes)
	}
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
	return p, nil
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
	return fmt.Sprintf("https://%s:%d", p.ControlPlane.Addr, APIServerPort)
}

// SwitchBits is the prefix length of the switch segment.
func (p *Plan) SwitchBits() int { return p.Switch.Bits() }

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
