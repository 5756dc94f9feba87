// Command estuary-daemon is estuary's node agent, run on every node as a
// host-network DaemonSet. It serves the CNI plugin's requests on a unix
// socket, builds and removes pod interfaces with the addresses the manager
// recorded as IPInstances, and installs the plugin binary and its conflist
// for the container runtime. --kubeconfig (registered by controller-runtime)
// defaults to the in-cluster configuration.
//
// `estuary-daemon endpoints [--health-address ADDR]` instead prints, as
// JSON, the endpoints the daemon running on this node plumbed, read from
// its health server's /endpoints (kubectl estuary check runs it in each
// daemon pod). `estuary-daemon node-state [-o json]` prints the node's
// links, addresses, rules, routes, neighbours, FDB, tc filters, nftables,
// sysctls and the daemon's endpoints and BGP peers (kubectl estuary sysdump
// runs it in each daemon pod). `estuary-daemon policy-drops [-o json]`
// prints the packets the node's policy table dropped most recently, read
// from the health server's /debug/policy/drops (kubectl estuary policy
// drops runs it in each daemon pod). `estuary-daemon uninstall` takes estuary off the node it
// runs on (the daemon must be stopped), as the daemon does itself when an
// uninstall is requested on its DaemonSet (--daemonset). --version prints the version and
// exits.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/clientgates"
	"github.com/estuary-cni/estuary/internal/cnibackend"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/daemon"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/internal/kubeclient"
	"github.com/estuary-cni/estuary/internal/memlimit"
	"github.com/estuary-cni/estuary/internal/uplink"
	"github.com/estuary-cni/estuary/internal/version"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == daemon.EndpointsCommandName {
		os.Exit(daemon.EndpointsMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == daemon.NodeStateCommandName {
		os.Exit(daemon.NodeStateMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == daemon.PolicyDropsCommandName {
		os.Exit(daemon.PolicyDropsMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == uninstallCommand {
		os.Exit(uninstallMain(os.Args[2:], os.Stdout, os.Stderr))
	}
	var (
		cfg     daemon.Config
		zapOpts = zap.Options{}
	)
	bindFlags(flag.CommandLine, &cfg)
	daemonSet := flag.String("daemonset", "", "NAMESPACE/NAME of the DaemonSet running this daemon: when its annotation "+estuaryv1.AnnotationUninstallRequest+" asks (helm uninstall's hook, kubectl estuary uninstall), the daemon takes estuary off the node. Its deletion never does. Empty: never")
	showVersion := flag.Bool("version", false, "print the version and exit")
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	if *showVersion {
		fmt.Println(version.Line("estuary-daemon"))
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	kube, err := ctrl.GetConfig()
	if err != nil {
		log.Error(err, "load kubeconfig")
		os.Exit(1)
	}
	cfg.Kube = kube
	log.Info("starting daemon", "node", cfg.NodeName, "version", version.Version, "commit", version.GitCommit)
	memlimit.Apply(log)
	clientgates.Apply(log)
	ctx := ctrl.SetupSignalHandler()
	if *daemonSet == "" {
		if err := daemon.Run(ctx, cfg); err != nil {
			log.Error(err, "daemon stopped")
			os.Exit(1)
		}
		return
	}
	watch, err := daemon.WatchUninstall(ctx, cfg.RESTConfig(), *daemonSet)
	if err != nil {
		log.Error(err, "watch the daemon's DaemonSet for an uninstall request")
		os.Exit(1)
	}
	switch err := daemon.RunUnlessUninstalled(ctx, cfg, watch); {
	case errors.Is(err, daemon.ErrUninstallWithdrawn):
		log.Info(err.Error())
	case err != nil:
		log.Error(err, "daemon stopped")
		os.Exit(1)
	}
}

// bindFlags registers the daemon's flags on fs, writing into cfg.
func bindFlags(fs *flag.FlagSet, cfg *daemon.Config) {
	fs.StringVar(&cfg.NodeName, "node-name", os.Getenv("NODE_NAME"), "this node's name (default: $NODE_NAME)")
	fs.StringVar(&cfg.SocketPath, "socket", cniserver.DefaultSocketPath, "unix socket the CNI plugin dials")
	fs.StringVar(&cfg.StatePath, "state-db", endpointstore.DefaultPath, "endpoint state database")
	fs.StringVar(&cfg.CNIBinDir, "cni-bin-dir", daemon.DefaultCNIBinDir, "directory the CNI plugin binary is installed into (as "+daemon.PluginType+")")
	fs.StringVar(&cfg.CNIConfDir, "cni-conf-dir", daemon.DefaultCNIConfDir, "directory the conflist is written into (as "+daemon.ConflistName+")")
	fs.StringVar(&cfg.ProcSysDir, "proc-sys-dir", "", "directory the daemon reads and writes kernel settings in, instead of /proc/sys: a writable mount of the host's /proc/sys (e.g. /host/proc/sys) when the daemon's container is not privileged. Empty: /proc/sys")
	fs.StringVar(&cfg.RTTablesDir, "rt-tables-dir", "", "directory iproute2 reads table names from (e.g. /etc/iproute2/rt_tables.d); estuary.conf there names estuary's routing tables for 'ip rule'. Empty: not written")
	fs.StringVar(&cfg.CNIBinarySource, "cni-binary-source", "", "path of the estuary-cni binary to install (required)")
	kubeclient.BindFlags(fs, &cfg.KubeClientQPS, &cfg.KubeClientBurst, "daemon")
	fs.DurationVar(&cfg.AddressTimeout, "address-timeout", cnibackend.DefaultAddressTimeout, "how long an ADD waits for the pod's addresses")
	fs.DurationVar(&cfg.GCInterval, "gc-interval", daemon.DefaultGCInterval, "how often endpoints whose pod is gone are looked for")
	fs.DurationVar(&cfg.GCGrace, "gc-grace", daemon.DefaultGCGrace, "how long a pod must have been gone (and its endpoint must exist) before the endpoint is removed")
	fs.IntVar(&cfg.MTU, "mtu", 0, "MTU of every pod interface (0: the tunnel's for overlay pods, the uplink's for underlay pods)")
	fs.Func("cni-extra-plugins", "comma-separated reference plugin binaries to install into the CNI bin dir (e.g. /plugins/portmap)",
		func(v string) error {
			for _, p := range strings.Split(v, ",") {
				if p = strings.TrimSpace(p); p != "" {
					cfg.CNIExtraPlugins = append(cfg.CNIExtraPlugins, p)
				}
			}
			return nil
		})
	fs.Func("cni-chained-plugins", `JSON array of plugin configurations the conflist lists after estuary's own, each an object with a "type" whose binary is in the CNI bin dir (e.g. [{"type":"tuning","sysctl":{"net.ipv4.conf.eth0.accept_local":"1"}}])`,
		func(v string) (err error) {
			cfg.CNIChainedPlugins, err = daemon.ParseChainedPlugins(v)
			return err
		})
	fs.StringVar((*string)(&cfg.Bandwidth), "cni-bandwidth", string(daemon.BandwidthAuto),
		"chain the reference bandwidth plugin, which shapes pods by their kubernetes.io/ingress-bandwidth and egress-bandwidth annotations: "+
			"auto (when --cni-extra-plugins installs a binary named bandwidth), on (it is in the CNI bin dir), off")
	fs.StringVar((*string)(&cfg.PortmapBackend), "cni-portmap-backend", string(daemon.PortmapIPTables),
		"firewall the portmap plugin writes hostPort rules with: iptables, or nftables on nodes without iptables")
	fs.StringVar(&cfg.CNIVersion, "cni-version", daemon.CNIVersion, "cniVersion of the installed conflist: 1.1.0, or 1.0.0 for runtimes that cannot parse 1.1 results (containerd 1.6)")
	fs.IntVar(&cfg.VXLANPort, "vxlan-port", daemon.DefaultVXLANPort, "UDP port of the overlay's VXLAN tunnel")
	fs.StringVar(&cfg.VXLANParent, "vxlan-parent", "", "link the tunnel runs over (default: the link of the default route)")
	fs.StringVar(&cfg.VXLANParentRegex, "vxlan-parent-regex", "", "pattern choosing the tunnel's link: the first matching link with a global address")
	fs.StringVar(&cfg.UnderlayUplink, "underlay-uplink", "", "NIC of the underlay's VLAN networks (default: the tunnel's parent link)")
	uplinkList(fs, &cfg.VLANUplinks, "vlan-uplinks", "VLAN networks' uplink: comma-separated names, the first existing one is used (default: --underlay-uplink)")
	uplinkList(fs, &cfg.BGPUplinks, "bgp-uplinks", "BGP networks' uplink: comma-separated names, the first existing one is used (default: --underlay-uplink)")
	uplinkList(fs, &cfg.VXLANParents, "vxlan-parents", "tunnel's parent link: comma-separated names, the first existing one with a global address is used (default: --vxlan-parent)")
	fs.IntVar(&cfg.KubeProxyMasqueradeBit, "kube-proxy-masquerade-bit", daemon.AutoMasqueradeBit,
		"kube-proxy's masquerade bit (0-31), whose mark estuary's NAT leaves to kube-proxy; -1 reads it from the ConfigMap kube-system/kube-proxy (default 14 when unreadable)")
	fs.BoolVar(&cfg.FastPath, "fast-path", true,
		"forward established, un-NATed pod traffic with a tc BPF program instead of the kernel's forwarding path; false removes it (sets net.netfilter.nf_conntrack_tcp_be_liberal=1 while on)")
	fs.BoolVar(&cfg.NetworkPolicy, "network-policy", true,
		"enforce NetworkPolicy and ClusterNetworkPolicy on this node's pods with the nftables table inet estuary-policy; false removes the table")
	fs.StringVar(&cfg.PodToNodeTraffic, "pod-to-node-traffic", "allow",
		"what a pod sends its own node (its addresses, host-network pods): allow admits it whatever the pod's egress policy, as Kubernetes specifies; policy judges it by the pod's egress policy")
	fs.BoolVar(&cfg.Pprof, "pprof", false,
		"serve Go's profiles (/debug/pprof/: heap, goroutines, CPU) on --health-probe-bind-address, to peers on the node's loopback only")
	bindFaultFlags(fs, cfg)
	fs.StringVar(&cfg.HealthAddr, "health-probe-bind-address", daemon.DefaultHealthAddress,
		`address /healthz (liveness), /readyz (readiness: also a data-path pass succeeded within the stale bound), /metrics, /bgp (the BGP peers as JSON), /endpoints (the endpoint store as JSON) and /debug/policy/drops (the policy's recent drops as JSON) bind to ("0" disables); `+
			`/bgp, /endpoints and /debug/policy/drops answer only peers on the node's loopback whatever the address, and so does /metrics with --metrics-bind-address`)
	fs.StringVar(&cfg.MetricsAddr, "metrics-bind-address", "",
		`address /metrics is served on over HTTPS (the certificate of --metrics-cert-dir, else a self-signed one) to callers whose bearer token the API server authenticates `+
			`and authorizes for get on the non-resource URL /metrics (TokenReview, SubjectAccessReview); empty or "0": not served`)
	fs.StringVar(&cfg.MetricsCertDir, "metrics-cert-dir", "",
		`directory of the tls.crt and tls.key /metrics is served with, read at each handshake (the manager's rotated metrics certificate, mounted); until they exist /metrics refuses handshakes and the daemon runs on. Empty: a self-signed certificate`)
}

// uplinkList registers a flag of comma-separated link names.
func uplinkList(fs *flag.FlagSet, dst *[]string, name, usage string) {
	fs.Func(name, usage, func(v string) error {
		list, err := uplink.ParseList(v)
		if err != nil {
			return fmt.Errorf("%q: %w", v, err)
		}
		*dst = list
		return nil
	})
}
