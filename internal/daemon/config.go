package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/estuary-cni/estuary/internal/cnibackend"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/internal/uplink"
)

// Defaults of the daemon's settings; each is also the default of the flag
// of the same name in cmd/estuary-daemon.
const (
	DefaultHostNetns  = "/proc/self/ns/net"
	DefaultCNIBinDir  = "/opt/cni/bin"
	DefaultCNIConfDir = "/etc/cni/net.d"
	// DefaultVXLANPort is the overlay's UDP port, the Linux kernel's
	// historical VXLAN port (as flannel and hybridnet use).
	DefaultVXLANPort = 8472
	// maxSocketPath is the longest path a unix socket address can hold.
	maxSocketPath = 107
)

// Config configures Run. Validate names each setting by its flag in
// cmd/estuary-daemon, so an error points at what the operator must change.
type Config struct {
	// NodeName is this node (--node-name); the address waiter reads only
	// the IPInstances labelled networking.estuary.io/node=<NodeName>.
	NodeName string
	// Kube is the API server's client configuration (--kubeconfig).
	Kube *rest.Config
	// KubeClientQPS and KubeClientBurst rate-limit every API client of the
	// daemon (--kube-client-qps, --kube-client-burst); 0:
	// kubeclient.DefaultQPS, kubeclient.DefaultBurst. See client.go.
	KubeClientQPS   float32
	KubeClientBurst int
	// SocketPath is the CNI server's unix socket (--socket).
	SocketPath string
	// StatePath is the endpoint store (--state-db).
	StatePath string
	// CNIBinDir receives the plugin binary, named PluginType (--cni-bin-dir).
	CNIBinDir string
	// CNIConfDir receives ConflistName (--cni-conf-dir).
	CNIConfDir string
	// RTTablesDir receives RTTablesName, the names of estuary's routing
	// tables for iproute2 (--rt-tables-dir); empty: not installed.
	RTTablesDir string
	// ProcSysDir is where the daemon reads and writes /proc/sys
	// (--proc-sys-dir): a writable mount of the host's when the daemon's
	// container is not privileged, whose own /proc/sys is read-only.
	// Empty: /proc/sys.
	ProcSysDir string
	// CNIBinarySource is the estuary-cni binary to install
	// (--cni-binary-source).
	CNIBinarySource string
	// GCInterval is how often the node GC looks for endpoints whose pod is
	// gone (--gc-interval); GCGrace how long a pod must have been gone, and
	// an endpoint must exist, before it is collected (--gc-grace).
	GCInterval, GCGrace time.Duration
	// AddressTimeout bounds an ADD's wait for the pod's addresses
	// (--address-timeout).
	AddressTimeout time.Duration
	// HostNetns is the node's network namespace; DefaultHostNetns if empty.
	// Tests point it at a namespace of their own.
	HostNetns string
	// MTU of every pod veth (--mtu); 0: derived at start, the tunnel's for
	// overlay pods and UnderlayMTU for underlay pods.
	MTU int
	// UnderlayMTU is the MTU of pods whose addresses are all on Underlay
	// networks; 0 means MTU. Derived at start, not a flag: the uplink's MTU
	// when --mtu is unset, else --mtu.
	UnderlayMTU int
	// CNIExtraPlugins are reference plugin binaries the conflist chains
	// (portmap), installed into CNIBinDir under their base names
	// (--cni-extra-plugins).
	CNIExtraPlugins []string
	// CNIChainedPlugins are the user's plugin configurations the conflist
	// lists after estuary's own, each a JSON object with a "type" whose
	// binary is in CNIBinDir (--cni-chained-plugins; chained.go).
	CNIChainedPlugins []json.RawMessage
	// Bandwidth says whether the conflist chains the reference bandwidth
	// plugin (--cni-bandwidth); BandwidthAuto if empty.
	Bandwidth BandwidthMode
	// PortmapBackend is the firewall the portmap plugin writes hostPort
	// rules with (--cni-portmap-backend); PortmapIPTables if empty.
	PortmapBackend PortmapBackend
	// CNIVersion is the conflist's cniVersion (--cni-version): 1.1.0, or
	// 1.0.0 for runtimes whose CNI library predates 1.1 (containerd 1.6
	// fails to parse a 1.1.0 result). CNIVersion if empty.
	CNIVersion string
	// VXLANPort is the overlay's UDP port (--vxlan-port).
	VXLANPort int
	// VXLANParent and VXLANParentRegex choose the tunnel's parent link by
	// name or by pattern; both empty: the link of the default route
	// (--vxlan-parent, --vxlan-parent-regex).
	VXLANParent      string
	VXLANParentRegex string
	// UnderlayUplink is the NIC of the underlay's VLAN networks: the parent
	// of their 802.1Q sub-interfaces and the link of untagged ones
	// (--underlay-uplink); empty: the tunnel's parent link.
	UnderlayUplink string
	// VLANUplinks, BGPUplinks and VXLANParents are the ordered candidates of
	// the VLAN networks' uplink, the BGP networks' uplink and the tunnel's
	// parent: the first that exists on the node is used, and a Node's
	// uplink annotations (internal/uplink) take precedence (--vlan-uplinks,
	// --bgp-uplinks, --vxlan-parents). Empty: UnderlayUplink for both
	// underlay modes, VXLANParent or VXLANParentRegex for the tunnel.
	VLANUplinks  []string
	BGPUplinks   []string
	VXLANParents []string
	// HealthAddr serves /healthz, /metrics, and to loopback peers only
	// /bgp and /endpoints (--health-probe-bind-address, default
	// DefaultHealthAddress); empty or "0" serves nothing.
	HealthAddr string
	// MetricsAddr serves /metrics over HTTPS to callers the API server
	// authenticates and authorizes (--metrics-bind-address; see
	// metricsserver.go); the health server's /metrics then answers only
	// the node's loopback. Empty or "0": not served, and the health
	// server's /metrics is the daemon's only one.
	MetricsAddr string
	// MetricsCertDir holds the tls.crt and tls.key /metrics is served with,
	// read at each handshake: the manager's rotated certificate, mounted
	// from its Secret (--metrics-cert-dir). Until they exist handshakes
	// fail and everything else runs. Empty: a self-signed certificate made
	// at start.
	MetricsCertDir string
	// Pprof serves Go's CPU and heap profiles on the health server's
	// /debug/pprof/, to the node's loopback only (--pprof).
	Pprof bool
	// FaultDataPathFile, for fault testing only, fails every data-path
	// pass while the file exists and hangs it while it holds "hang"
	// (--fault-datapath-file; faultinject.DataPathFault). Empty: off. Only
	// a build with the faultinject tag injects it; another refuses it.
	FaultDataPathFile string
	// KubeProxyMasqueradeBit is kube-proxy's masquerade bit, 0-31, whose
	// mark estuary's NAT leaves to kube-proxy; AutoMasqueradeBit reads it
	// from kube-proxy's ConfigMap, falling back to 14
	// (--kube-proxy-masquerade-bit). The flag's default is auto; the zero
	// value of the field is bit 0.
	KubeProxyMasqueradeBit int
	// FastPath runs the forwarding fast path (package fastpath) on the
	// node's devices; off, the daemon removes it from them.
	FastPath bool
	// NetworkPolicy enforces NetworkPolicy and ClusterNetworkPolicy on
	// this node; off, the daemon removes its policy table. On, the fast path leaves every ICMP echo to netfilter,
	// where the policy table decides it (fastpath.Options.EchoViaStack).
	NetworkPolicy bool
	// PodToNodeTraffic says how policy judges what a pod sends its own
	// node: "allow" admits it whatever the pod's egress policy, as
	// Kubernetes specifies; "policy" judges it by the pod's egress policy
	// (--pod-to-node-traffic; policy.ParsePodToNode); "allow" if empty.
	PodToNodeTraffic string
}

// BandwidthMode says when the conflist chains the reference bandwidth
// plugin, which shapes pods' traffic as their kubernetes.io/ingress-bandwidth
// and kubernetes.io/egress-bandwidth annotations ask.
type BandwidthMode string

// The values of --cni-bandwidth.
const (
	// BandwidthAuto chains it when one of CNIExtraPlugins is named
	// BandwidthPluginType, i.e. when the daemon installs it.
	BandwidthAuto BandwidthMode = "auto"
	// BandwidthOn chains it whatever the daemon installs: the binary is put
	// into the CNI bin dir by other means.
	BandwidthOn BandwidthMode = "on"
	// BandwidthOff never chains it.
	BandwidthOff BandwidthMode = "off"
)

// PortmapBackend is the value of portmap's backend field: the firewall its
// hostPort rules are written with.
type PortmapBackend string

// The values of --cni-portmap-backend.
const (
	// PortmapIPTables writes hostPort rules with the iptables binary, what
	// portmap picks itself on a node where iptables works.
	PortmapIPTables PortmapBackend = "iptables"
	// PortmapNFTables writes them through nftables, for nodes without
	// iptables.
	PortmapNFTables PortmapBackend = "nftables"
)

// chainsBandwidth reports whether the conflist chains the bandwidth plugin.
func (c Config) chainsBandwidth() bool {
	switch c.Bandwidth {
	case BandwidthOn:
		return true
	case BandwidthOff:
		return false
	}
	return slices.ContainsFunc(c.CNIExtraPlugins, func(p string) bool { return filepath.Base(p) == BandwidthPluginType })
}

// AutoMasqueradeBit makes the daemon read kube-proxy's masquerade bit from
// the ConfigMap kube-system/kube-proxy.
const AutoMasqueradeBit = -1

// withDefaults fills the empty settings that have a default.
func (c Config) withDefaults() Config {
	if c.SocketPath == "" {
		c.SocketPath = cniserver.DefaultSocketPath
	}
	if c.StatePath == "" {
		c.StatePath = endpointstore.DefaultPath
	}
	if c.CNIBinDir == "" {
		c.CNIBinDir = DefaultCNIBinDir
	}
	if c.CNIConfDir == "" {
		c.CNIConfDir = DefaultCNIConfDir
	}
	if c.AddressTimeout == 0 {
		c.AddressTimeout = cnibackend.DefaultAddressTimeout
	}
	if c.GCInterval == 0 {
		c.GCInterval = DefaultGCInterval
	}
	if c.GCGrace == 0 {
		c.GCGrace = DefaultGCGrace
	}
	if c.HostNetns == "" {
		c.HostNetns = DefaultHostNetns
	}
	if c.VXLANPort == 0 {
		c.VXLANPort = DefaultVXLANPort
	}
	if c.CNIVersion == "" {
		c.CNIVersion = CNIVersion
	}
	if c.Bandwidth == "" {
		c.Bandwidth = BandwidthAuto
	}
	if c.PodToNodeTraffic == "" {
		c.PodToNodeTraffic = policy.PodToNodeAllow.String()
	}
	return c
}

// Validate reports every invalid setting of c (after defaults), each named
// by its flag.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("--node-name: required (or set NODE_NAME)"))
	}
	if c.Kube == nil {
		errs = append(errs, errors.New("--kubeconfig: no API server configuration"))
	}
	errs = append(errs, c.validateClient()...)
	errs = append(errs, c.validateFaults())
	errs = append(errs,
		absolute("--socket", c.SocketPath),
		absolute("--state-db", c.StatePath),
		absolute("--cni-bin-dir", c.CNIBinDir),
		absolute("--cni-conf-dir", c.CNIConfDir),
		absolute("--cni-binary-source", c.CNIBinarySource),
		absolute("host network namespace", c.HostNetns),
	)
	if c.RTTablesDir != "" {
		errs = append(errs, absolute("--rt-tables-dir", c.RTTablesDir))
	}
	if len(c.SocketPath) > maxSocketPath {
		errs = append(errs, fmt.Errorf("--socket: %q is longer than %d bytes", c.SocketPath, maxSocketPath))
	}
	if c.GCInterval < time.Second {
		errs = append(errs, fmt.Errorf("--gc-interval: %s is shorter than 1s", c.GCInterval))
	}
	if c.GCGrace < 0 {
		errs = append(errs, fmt.Errorf("--gc-grace: %s is negative", c.GCGrace))
	}
	if c.AddressTimeout < time.Second || c.AddressTimeout > maxAddressTimeout {
		errs = append(errs, fmt.Errorf("--address-timeout: %s is outside 1s..%s", c.AddressTimeout, maxAddressTimeout))
	}
	for _, p := range c.CNIExtraPlugins {
		errs = append(errs, absolute("--cni-extra-plugins", p))
	}
	if err := checkChainedPlugins(c.CNIChainedPlugins); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", chainedFlag, err))
	}
	if c.CNIVersion != "1.0.0" && c.CNIVersion != "1.1.0" {
		errs = append(errs, fmt.Errorf("--cni-version: %q is neither 1.0.0 nor 1.1.0", c.CNIVersion))
	}
	if c.Bandwidth != BandwidthAuto && c.Bandwidth != BandwidthOn && c.Bandwidth != BandwidthOff {
		errs = append(errs, fmt.Errorf("--cni-bandwidth: %q is none of auto, on, off", c.Bandwidth))
	}
	if c.PortmapBackend != "" && c.PortmapBackend != PortmapIPTables && c.PortmapBackend != PortmapNFTables {
		errs = append(errs, fmt.Errorf("--cni-portmap-backend: %q is neither iptables nor nftables", c.PortmapBackend))
	}
	if c.VXLANPort < 1 || c.VXLANPort > 65535 {
		errs = append(errs, fmt.Errorf("--vxlan-port: %d is outside 1..65535", c.VXLANPort))
	}
	if c.VXLANParent != "" && c.VXLANParentRegex != "" {
		errs = append(errs, errors.New("--vxlan-parent and --vxlan-parent-regex: set at most one"))
	}
	if len(c.UnderlayUplink) > 15 || strings.ContainsAny(c.UnderlayUplink, "/ ") {
		errs = append(errs, fmt.Errorf("--underlay-uplink: %q is not a link name", c.UnderlayUplink))
	}
	for _, l := range []struct {
		flag string
		list []string
	}{{"--vlan-uplinks", c.VLANUplinks}, {"--bgp-uplinks", c.BGPUplinks}, {"--vxlan-parents", c.VXLANParents}} {
		if err := uplink.Validate(l.list); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.flag, err))
		}
	}
	if len(c.VXLANParents) > 0 && c.VXLANParentRegex != "" {
		errs = append(errs, errors.New("--vxlan-parents and --vxlan-parent-regex: set at most one"))
	}
	if _, err := regexp.Compile(c.VXLANParentRegex); err != nil {
		errs = append(errs, fmt.Errorf("--vxlan-parent-regex: %w", err))
	}
	if c.servesMetrics() {
		if _, _, err := net.SplitHostPort(c.MetricsAddr); err != nil {
			errs = append(errs, fmt.Errorf("--metrics-bind-address: %w", err))
		}
	}
	if c.KubeProxyMasqueradeBit < AutoMasqueradeBit || c.KubeProxyMasqueradeBit > 31 {
		errs = append(errs, fmt.Errorf("--kube-proxy-masquerade-bit: %d is neither -1 (auto) nor in 0..31", c.KubeProxyMasqueradeBit))
	}
	if _, err := policy.ParsePodToNode(c.PodToNodeTraffic); err != nil {
		errs = append(errs, fmt.Errorf("--pod-to-node-traffic: %w", err))
	}
	if c.MTU < 0 || (c.MTU > 0 && c.MTU < 576) || c.MTU > 65535 {
		errs = append(errs, fmt.Errorf("--mtu: %d is neither 0 nor in 576..65535", c.MTU))
	}
	return errors.Join(errs...)
}

func absolute(flag, path string) error {
	switch {
	case path == "":
		return fmt.Errorf("%s: required", flag)
	case !filepath.IsAbs(path):
		return fmt.Errorf("%s: %q is not an absolute path", flag, path)
	}
	return nil
}

// stateDir is the directory of the endpoint store, where the daemon keeps
// its node journal too.
func (c Config) stateDir() string { return filepath.Dir(c.StatePath) }
