package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/estuary-cni/estuary/pkg/family"
	"github.com/estuary-cni/estuary/test/infra/lab/netlab"
	"github.com/estuary-cni/estuary/test/infra/lab/proc"
)

// Status is what `estuary-lab status` reports.
type Status struct {
	Phase             string `json:"phase"` // absent, starting, running
	StateDir          string `json:"stateDir"`
	Kubeconfig        string `json:"kubeconfig"`
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	CNI               string `json:"cni,omitempty"`
	Bootstrap         string `json:"bootstrap,omitempty"` // lab or kubeadm
	ProxyMode         string `json:"proxyMode,omitempty"`
	IPFamily          string `json:"ipFamily"` // ipv4, dual or ipv6
	// Families is the address plan of each IP family, the first (the one
	// the fields above give) first.
	Families     []FamilyStatus      `json:"families"`
	BinDir       string              `json:"binDir,omitempty"`
	Switch       SwitchStatus        `json:"switch"`
	Router       RouterStatus        `json:"router"`
	External     HostStatus          `json:"external"`
	ControlPlane HostStatus          `json:"controlPlane"`
	Nodes        []NodeInfo          `json:"nodes"`
	PodCIDR      string              `json:"podCIDR"`
	ServiceCIDR  string              `json:"serviceCIDR"`
	Images       map[string]string   `json:"images"`
	Estuary      *EstuaryState       `json:"estuary,omitempty"`
	Flannel      *FlannelState       `json:"flannel,omitempty"`
	Kubeadm      *KubeadmState       `json:"kubeadm,omitempty"`
	Hybridnet    *HybridnetState     `json:"hybridnet,omitempty"`
	Components   []Component         `json:"components"`
	Capabilities netlab.Capabilities `json:"kernelCapabilities"`
	Memory       *MemoryStatus       `json:"memory,omitempty"`
}

// MemoryStatus is the memory the running lab uses: what its cgroup is charged (page
// cache included) and the summed resident set size of its processes.
type MemoryStatus struct {
	CgroupBytes uint64 `json:"cgroupBytes"`
	RSSBytes    uint64 `json:"rssBytes"`
	Processes   int    `json:"processes"`
}

// SwitchStatus describes the underlay segment.
type SwitchStatus struct {
	CIDR      string `json:"cidr"`
	Namespace string `json:"namespace"`
}

// RouterStatus describes the router: the gateway of the underlay and its BGP speaker.
type RouterStatus struct {
	Address      string `json:"address"`
	Namespace    string `json:"namespace"`
	ASN          int    `json:"asn"`
	NodeASN      int    `json:"nodeASN"` // the AS it expects of every node
	BirdSocket   string `json:"birdSocket"`
	ExternalLink string `json:"externalLinkAddress"`
}

// HostStatus is one namespace with an address.
type HostStatus struct {
	Address   string `json:"address"`
	Namespace string `json:"namespace"`
	Subnet    string `json:"subnet,omitempty"`
}

// FamilyStatus is the lab's addresses of one IP family.
type FamilyStatus struct {
	Family          string            `json:"family"` // IPv4 or IPv6
	Switch          string            `json:"switch"`
	Router          string            `json:"router"`
	RouterExternal  string            `json:"routerExternal"`
	External        string            `json:"external"`
	ExternalSubnet  string            `json:"externalSubnet"`
	ControlPlane    string            `json:"controlPlane"`
	Underlay        string            `json:"underlay"`        // the second subnet on the switch
	UnderlayGateway string            `json:"underlayGateway"` // the router's address in it
	BGPSubnet       string            `json:"bgpSubnet"`
	PodCIDR         string            `json:"podCIDR"`
	OverlaySubnet   string            `json:"overlaySubnet"` // estuary's default network's subnet of this family
	ServiceCIDR     string            `json:"serviceCIDR"`
	DNSService      string            `json:"dnsService"`
	Nodes           map[string]string `json:"nodes"`        // node name: address
	NodePodCIDRs    map[string]string `json:"nodePodCIDRs"` // node name: pod CIDR
}

func (p *Plan) familyStatus() FamilyStatus {
	f := FamilyStatus{Family: string(family.IPv4), Switch: p.Switch.String(), Router: p.Router.Addr.String(),
		RouterExternal: p.RouterExt.String(), External: p.External.Addr.String(), ExternalSubnet: p.ExternalNet.String(),
		ControlPlane: p.ControlPlane.Addr.String(), Underlay: p.Underlay.String(), UnderlayGateway: p.RouterUnder.String(),
		BGPSubnet: BGPCIDR, PodCIDR: p.Pods.String(), OverlaySubnet: p.OverlaySubnet().String(),
		ServiceCIDR: p.Services.String(), DNSService: p.DNSService.String(),
		Nodes: map[string]string{}, NodePodCIDRs: map[string]string{}}
	if p.IPv6() {
		f.Family, f.BGPSubnet = string(family.IPv6), BGPCIDR6
	}
	for _, n := range p.Nodes {
		f.Nodes[n.Name], f.NodePodCIDRs[n.Name] = n.Addr.String(), n.PodCIDR.String()
	}
	return f
}

// NodeInfo is one node of the lab.
type NodeInfo struct {
	Name      string   `json:"name"`
	Address   string   `json:"address"`
	Addresses []string `json:"addresses"` // one per IP family, the first family's first
	Namespace string   `json:"namespace"`
	PodCIDR   string   `json:"podCIDR"`
	Ready     *bool    `json:"ready,omitempty"`
}

// Component is one lab process.
type Component struct {
	Name    string `json:"name"`
	PID     int    `json:"pid"`
	Running bool   `json:"running"`
	Log     string `json:"log"`
}

// Status reports the lab; node readiness is included when the API server answers.
func (l *Lab) Status(ctx context.Context) (*Status, error) {
	pl := l.plan
	s := &Status{Phase: "absent", StateDir: l.paths.Root, Kubeconfig: l.paths.Kubeconfig(),
		Switch:       SwitchStatus{CIDR: pl.Switch.String(), Namespace: pl.SwitchNS},
		Router:       RouterStatus{Address: pl.Router.Addr.String(), Namespace: pl.Router.NetNS, ASN: RouterASN, NodeASN: NodeASN, BirdSocket: l.birdSocket(), ExternalLink: pl.RouterExt.String()},
		External:     HostStatus{Address: pl.External.Addr.String(), Namespace: pl.External.NetNS, Subnet: pl.ExternalNet.String()},
		ControlPlane: HostStatus{Address: pl.ControlPlane.Addr.String(), Namespace: pl.ControlPlane.NetNS},
		PodCIDR:      pl.Pods.String(), ServiceCIDR: pl.Services.String(),
		Images:   map[string]string{"pause": PauseImage, "agnhost": AgnhostImage, "coredns": CoreDNSImage},
		IPFamily: pl.Family,
	}
	for _, st := range pl.Stacks() {
		s.Families = append(s.Families, st.familyStatus())
	}
	for _, n := range pl.Nodes {
		var addrs []string
		for _, a := range pl.NodeIPs(n.Name) {
			addrs = append(addrs, a.String())
		}
		s.Nodes = append(s.Nodes, NodeInfo{Name: n.Name, Address: n.Addr.String(), Addresses: addrs, Namespace: n.NetNS, PodCIDR: n.PodCIDR.String()})
	}
	caps, err := netlab.Probe(Prefix + "-probe")
	if err != nil {
		return nil, fmt.Errorf("probe kernel capabilities: %w", err)
	}
	s.Capabilities = caps
	st, err := loadState(l.paths.StateFile())
	if errors.Is(err, os.ErrNotExist) {
		return s, nil
	}
	if err != nil {
		return nil, err
	}
	s.Phase, s.KubernetesVersion, s.CNI, s.ProxyMode = st.Phase, st.KubernetesVersion, st.CNI, st.ProxyMode
	s.BinDir = st.BinDir
	if e := st.Estuary; e != nil {
		s.Estuary = e
		s.Images["estuary-manager"], s.Images["estuary-daemon"] = e.Images["estuary-manager"], e.Images["estuary-daemon"]
	}
	s.Flannel = st.Flannel
	s.Bootstrap, s.Kubeadm, s.Hybridnet = st.Bootstrap, st.Kubeadm, st.Hybridnet
	if s.Bootstrap == "" {
		s.Bootstrap = BootstrapLab
	}
	s.Components = l.components()
	if cg, rss, err := Memory(); err == nil {
		s.Memory = &MemoryStatus{CgroupBytes: cg, RSSBytes: rss, Processes: len(proc.CgroupPIDs(Prefix))}
	}
	l.addReadiness(ctx, s, st.BinDir)
	return s, nil
}

func (l *Lab) components() []Component {
	files, _ := filepath.Glob(filepath.Join(l.paths.Run(), "*.pid"))
	sort.Strings(files)
	var out []Component
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		pid := proc.ReadPID(f)
		out = append(out, Component{Name: name, PID: pid, Running: pid > 0 && proc.Alive(pid), Log: l.paths.Log(name)})
	}
	return out
}

func (l *Lab) addReadiness(ctx context.Context, s *Status, bin string) {
	if bin == "" {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	nodes, err := l.nodeStatuses(ctx, bin)
	if err != nil {
		return
	}
	for i := range s.Nodes {
		ready := false
		for _, n := range nodes {
			if n.Name == s.Nodes[i].Name {
				ready = n.Ready
				if n.PodCIDR != "" {
					s.Nodes[i].PodCIDR = n.PodCIDR // kube-controller-manager's with --cni flannel
				}
			}
		}
		s.Nodes[i].Ready = &ready
	}
}

// WriteTable prints s for people.
func (s *Status) WriteTable(w io.Writer) error {
	var b strings.Builder
	pf := func(format string, a ...any) { _, _ = fmt.Fprintf(&b, format, a...) }
	pf("lab:          %s (state %s)\n", s.Phase, s.StateDir)
	pf("kubeconfig:   %s\n", s.Kubeconfig)
	pf("kubernetes:   %s   cni: %s   proxy: %s   ip family: %s   bootstrap: %s\n", s.KubernetesVersion, s.CNI, s.ProxyMode, s.IPFamily, s.Bootstrap)
	pf("switch:       %s (netns %s)\n", s.Switch.CIDR, s.Switch.Namespace)
	pf("router:       %s (gateway, BGP AS %d peering with every node as AS %d, netns %s)\n",
		s.Router.Address, s.Router.ASN, s.Router.NodeASN, s.Router.Namespace)
	pf("external:     %s on %s via %s (netns %s)\n", s.External.Address, s.External.Subnet, s.Router.ExternalLink, s.External.Namespace)
	pf("control-plane %s (netns %s)\n", s.ControlPlane.Address, s.ControlPlane.Namespace)
	pf("pods %s  services %s\n", s.PodCIDR, s.ServiceCIDR)
	for _, f := range s.Families[min(1, len(s.Families)):] {
		pf("%s:         switch %s, router %s, external %s, control-plane %s, pods %s, services %s\n",
			f.Family, f.Switch, f.Router, f.External, f.ControlPlane, f.PodCIDR, f.ServiceCIDR)
	}
	if e := s.Estuary; e != nil {
		pf("estuary:      %s from %s, release %s in %s, images %s %s\n", e.ChartVersion, e.Chart, e.Release, e.Namespace,
			e.Images["estuary-manager"], e.Images["estuary-daemon"])
	}
	if f := s.Flannel; f != nil {
		pf("flannel:      flanneld %s, backend %s (%s), binaries in %s\n", f.Version, f.Backend, FlannelDevice, f.BinDir)
	}
	pf("kernel:       802.1Q VLAN %v, VXLAN %v %s\n\n", s.Capabilities.VLAN, s.Capabilities.VXLAN, s.Capabilities.Detail)
	rows := [][]string{{"NODE", "ADDRESS", "POD CIDR", "READY", "NETNS"}}
	for _, n := range s.Nodes {
		ready := "?"
		if n.Ready != nil {
			ready = fmt.Sprint(*n.Ready)
		}
		rows = append(rows, []string{n.Name, strings.Join(n.Addresses, ","), n.PodCIDR, ready, n.Namespace})
	}
	b.WriteString(table(rows))
	if s.Memory != nil {
		pf("\nmemory: %d processes, RSS %.0f MiB, cgroup %.0f MiB (page cache included)\n",
			s.Memory.Processes, float64(s.Memory.RSSBytes)/(1<<20), float64(s.Memory.CgroupBytes)/(1<<20))
	}
	if len(s.Components) > 0 {
		rows = [][]string{{"COMPONENT", "PID", "RUNNING"}}
		for _, c := range s.Components {
			rows = append(rows, []string{c.Name, fmt.Sprint(c.PID), fmt.Sprint(c.Running)})
		}
		b.WriteString("\n" + table(rows))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// table aligns rows in columns.
func table(rows [][]string) string {
	width := map[int]int{}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
			} else {
				b.WriteString(c + strings.Repeat(" ", width[i]-len(c)+2))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
