// Command flanneld runs flannel's own node agent, as the lab's `--cni flannel`
// uses it: the Kubernetes subnet manager (each node's lease is its
// spec.podCIDR), the VXLAN backend and flannel's traffic manager for the
// masquerade and forward rules. Only the wiring is here; every piece of
// behaviour is flannel's package. flannel's own main package cannot be built
// from the Go module proxy (it links a cloud backend whose dependency the
// proxy refuses), so this main registers the VXLAN backend alone.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/flannel-io/flannel/pkg/backend"
	_ "github.com/flannel-io/flannel/pkg/backend/vxlan" // registers the vxlan backend
	"github.com/flannel-io/flannel/pkg/ip"
	"github.com/flannel-io/flannel/pkg/ipmatch"
	"github.com/flannel-io/flannel/pkg/subnet"
	"github.com/flannel-io/flannel/pkg/subnet/kube"
	"github.com/flannel-io/flannel/pkg/trafficmngr"
	"github.com/flannel-io/flannel/pkg/trafficmngr/iptables"
	"github.com/flannel-io/flannel/pkg/trafficmngr/nftables"
	"github.com/flannel-io/flannel/pkg/version"
	"github.com/joho/godotenv"
	log "k8s.io/klog/v2"
)

// options are the flags of flannel's flanneld that the lab sets; the names
// and defaults are flannel's.
type options struct {
	kubeconfig       string
	netConfPath      string
	subnetFile       string
	annotationPrefix string
	iface            string
	ipMasq           bool
	masqRandomOff    bool
	resyncSeconds    int
	forwardRules     bool
	healthzIP        string
	healthzPort      int
	nodeUnavailable  bool
	printVersion     bool
}

func parseFlags() options {
	var o options
	fs := flag.NewFlagSet("flanneld", flag.ExitOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig-file", "", "kubeconfig of the node agent")
	fs.StringVar(&o.netConfPath, "net-config-path", "/etc/kube-flannel/net-conf.json", "flannel network configuration")
	fs.StringVar(&o.subnetFile, "subnet-file", "/run/flannel/subnet.env", "where the lease (subnet, MTU, masquerade) is written")
	fs.StringVar(&o.annotationPrefix, "kube-annotation-prefix", "flannel.alpha.coreos.com", "Node annotation prefix")
	fs.StringVar(&o.iface, "iface", "", "interface (name or address) carrying the VXLAN traffic; the default route's when empty")
	fs.BoolVar(&o.ipMasq, "ip-masq", false, "masquerade traffic from pods to destinations outside the flannel network")
	fs.BoolVar(&o.masqRandomOff, "ip-masq-fully-random-disable", false, "masquerade without --random-fully")
	fs.IntVar(&o.resyncSeconds, "iptables-resync", 5, "resync period of the traffic rules, seconds")
	fs.BoolVar(&o.forwardRules, "iptables-forward-rules", true, "accept forwarded traffic of the flannel network")
	fs.StringVar(&o.healthzIP, "healthz-ip", "0.0.0.0", "address of /healthz and /readyz")
	fs.IntVar(&o.healthzPort, "healthz-port", 0, "port of /healthz and /readyz (0: off)")
	fs.BoolVar(&o.nodeUnavailable, "set-node-network-unavailable", true, "clear the Node's NetworkUnavailable condition once ready")
	fs.BoolVar(&o.printVersion, "version", false, "print flannel's version and exit")
	log.InitFlags(fs)
	_ = fs.Set("logtostderr", "true")
	_ = fs.Parse(os.Args[1:])
	return o
}

func main() {
	o := parseFlags()
	if o.printVersion {
		fmt.Println(version.Version)
		return
	}
	if err := run(o); err != nil {
		log.Errorf("flanneld: %v", err)
		os.Exit(1)
	}
	log.Info("flanneld exited cleanly")
}

func run(o options) error {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	log.Infof("flannel %s, options %+v", version.Version, o)

	sm, err := kube.NewSubnetManager(ctx, "", o.kubeconfig, o.annotationPrefix, o.netConfPath, o.nodeUnavailable)
	if err != nil {
		return fmt.Errorf("kube subnet manager: %w", err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	var ready atomic.Bool
	if o.healthzPort > 0 {
		serveHealthz(ctx, &wg, net.JoinHostPort(o.healthzIP, strconv.Itoa(o.healthzPort)), &ready)
	}
	config, err := networkConfig(ctx, sm)
	if err != nil {
		return err
	}
	ext, err := externalInterface(ctx, sm, o.iface, config)
	if err != nil {
		return err
	}
	be, err := backend.NewManager(ctx, sm, ext).GetBackend(config.BackendType)
	if err != nil {
		return fmt.Errorf("backend %q: %w", config.BackendType, err)
	}
	bn, err := be.RegisterNetwork(ctx, &wg, config)
	if err != nil {
		return fmt.Errorf("register network: %w", err)
	}
	// Rules of the other traffic manager (a previous run with the other
	// choice) go first, as flannel does.
	if err := trafficManager(!config.EnableNFTables).CleanUp(ctx); err != nil {
		return fmt.Errorf("clean up unused traffic rules: %w", err)
	}
	tm := trafficManager(config.EnableNFTables)
	if err := tm.Init(ctx); err != nil {
		return fmt.Errorf("traffic manager: %w", err)
	}
	if o.ipMasq {
		err := tm.SetupAndEnsureMasqRules(ctx,
			config.Network, previous4(o.subnetFile, "FLANNEL_SUBNET"), previous4(o.subnetFile, "FLANNEL_NETWORK"),
			config.IPv6Network, previous6(o.subnetFile, "FLANNEL_IPV6_SUBNET"), previous6(o.subnetFile, "FLANNEL_IPV6_NETWORK"),
			bn.Lease(), o.resyncSeconds, o.masqRandomOff)
		if err != nil {
			return fmt.Errorf("masquerade rules: %w", err)
		}
	}
	if o.forwardRules {
		tm.SetupAndEnsureForwardRules(ctx, config.Network, config.IPv6Network, o.resyncSeconds)
	}
	l := bn.Lease()
	if err := sm.HandleSubnetFile(o.subnetFile, config, o.ipMasq, l.Subnet, l.IPv6Subnet, bn.MTU()); err != nil {
		return fmt.Errorf("write %s: %w", o.subnetFile, err)
	}
	ready.Store(true)
	log.Infof("wrote %s; flannel is ready", o.subnetFile)
	wg.Add(1)
	go func() { defer wg.Done(); bn.Run(ctx) }()
	if err := sm.CompleteLease(ctx, l, &wg); err != nil && ctx.Err() == nil {
		cancel()
		return fmt.Errorf("lease: %w", err)
	}
	<-ctx.Done()
	return nil
}

// networkConfig reads the network configuration, retrying every second.
func networkConfig(ctx context.Context, sm subnet.Manager) (*subnet.Config, error) {
	for {
		config, err := sm.GetNetworkConfig(ctx)
		if err == nil && config != nil {
			log.Infof("network %s, backend %s", config.Network, config.BackendType)
			return config, nil
		}
		log.Errorf("network config: %v", err)
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("network config: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// externalInterface picks the interface the VXLAN traffic leaves by, as
// flanneld does: the named one, else the default route's, honouring a public
// address stored on the Node.
func externalInterface(ctx context.Context, sm subnet.Manager, iface string, config *subnet.Config) (*backend.ExternalInterface, error) {
	stack, err := ipmatch.GetIPFamily(config.EnableIPv4, config.EnableIPv6)
	if err != nil {
		return nil, fmt.Errorf("ip family: %w", err)
	}
	public4, public6 := sm.GetStoredPublicIP(ctx)
	pub := ipmatch.PublicIPOpts{PublicIP: public4, PublicIPv6: public6}
	name := iface
	if name == "" {
		name = public4
		if name == "" {
			name = public6
		}
	}
	ext, err := ipmatch.LookupExtIface(name, "", "", stack, pub)
	if err != nil {
		return nil, fmt.Errorf("interface %q: %w", name, err)
	}
	return ext, nil
}

func trafficManager(nft bool) trafficmngr.TrafficManager {
	if nft {
		return &nftables.NFTablesManager{}
	}
	return &iptables.IPTablesManager{}
}

// previous4 and previous6 read a range from an earlier subnet file, so that
// the traffic manager replaces the rules of a changed lease.
func previous4(path, key string) ip.IP4Net {
	for _, n := range previous(path, key) {
		if n.IP.To4() != nil {
			return ip.FromIPNet(n)
		}
	}
	return ip.IP4Net{}
}

func previous6(path, key string) ip.IP6Net {
	for _, n := range previous(path, key) {
		if n.IP.To4() == nil {
			return ip.FromIP6Net(n)
		}
	}
	return ip.IP6Net{}
}

func previous(path, key string) []*net.IPNet {
	vals, err := godotenv.Read(path)
	if err != nil {
		return nil
	}
	var out []*net.IPNet
	for _, s := range strings.Split(vals[key], ",") {
		if _, n, err := net.ParseCIDR(strings.TrimSpace(s)); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func serveHealthz(ctx context.Context, wg *sync.WaitGroup, addr string, ready *atomic.Bool) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	wg.Add(2)
	go func() {
		defer wg.Done()
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Errorf("healthz: %v", err)
		}
	}()
	go func() {
		defer wg.Done()
		<-ctx.Done()
		sctx, c := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Second)
		defer c()
		_ = srv.Shutdown(sctx)
	}()
}
