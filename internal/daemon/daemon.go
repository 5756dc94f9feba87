// Package daemon owns the node agent's lifecycle: it wires the pieces of the
// estuary daemon together, starts them in order and stops them cleanly.
// Each piece is a component with a start and a stop hook (components.go);
// Run registers them on an internal/lifecycle.Lifecycle in start order, and
// the lifecycle stops them in reverse, or, when one fails to start, stops
// those already started.
//
// Run sets the node sysctls, opens the overlay data plane on the node's
// network namespace, starts an informer cache of the API objects the node
// needs and the address waiter over it (ipwait), the pod attachment backend
// (node), the CNI server (cniserver) on its unix socket with its endpoint
// store, and the data-path loop (datapath) that keeps the tunnel, the
// underlay's VLAN interfaces, routes, rules, neighbours, FDB and NAT in line
// with the API and the store and runs the BGP speakers; then it installs the
// estuary-cni binary, the reference plugins and the conflist the container
// runtime reads, keeps the conflist there and publishes what it set up (the
// conflist, the fast path) on its Node (nodestatus.go), records Events on
// its Node when those or a BGP session change or its data path turns stale
// (events.go, datapathhealth.go), and serves /healthz (liveness), /readyz
// (readiness: also a data-path pass succeeded lately), the BGP peers'
// status as JSON on /bgp and the endpoint store,
// read-only, as JSON on /endpoints, and its metrics on /metrics, over HTTPS
// to scrapers the API server authorizes (metricsserver.go) and to the
// node's loopback. When its context ends it stops the server (the socket is removed,
// the store closed), the loop (its BGP speakers without deconfiguring their
// sessions) and the cache; the kernel state stays, so pods keep their
// connectivity while the daemon restarts. The installed binary and conflist
// stay: a restarting daemon must not make the node's network unready.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	npv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	npv1beta1 "sigs.k8s.io/network-policy-api/apis/v1beta1"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/cnibackend"
	"github.com/estuary-cni/estuary/internal/cnibackend/ipwait"
	"github.com/estuary-cni/estuary/internal/cnibackend/segment"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/daemon/datapath"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/internal/lifecycle"
	"github.com/estuary-cni/estuary/internal/sysctl"
	uplinkpkg "github.com/estuary-cni/estuary/internal/uplink"
)

// log is the daemon's logger; controller-runtime's delegating logger, so the
// command's SetLogger applies.
var log = crlog.Log.WithName("daemon")

// nodeSysctls are the host settings the daemon needs before any pod: the
// node routes between pods and the rest of the network. The per-veth
// settings (proxy_arp, forwarding, IPv6's) are podnet's, written per pod.
var nodeSysctls = []sysctl.Setting{{Key: "net/ipv4/ip_forward", Value: "1"}}

// Run runs the node daemon until ctx ends or a part of it fails. It returns
// nil after a clean stop on ctx's end.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	cfg = cfg.withDefaults()
	cfg.Kube = cfg.RESTConfig()
	sysctl.SetRoot(cfg.ProcSysDir)
	log.Info("starting", "node", cfg.NodeName, "hostNetns", cfg.HostNetns)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d := &components{cfg: cfg, parts: newRunning(), cancel: cancel}
	d.k.cfg = &d.cfg
	var lc lifecycle.Lifecycle
	for _, h := range d.hooks() {
		lc.Append(h)
	}
	if err := lc.Start(ctx); err != nil {
		return err
	}
	stopErr := d.wait(ctx)
	cancel()
	return errors.Join(stopErr, lc.Stop(context.WithoutCancel(ctx)))
}

// podMTU is the configured pod MTU for every pod or, when none is, the
// tunnel's for overlay pods (a pod packet must fit the VXLAN device after
// encapsulation) and the uplink's for underlay pods (they carry no tunnel
// header, and hosts on their network expect its full MTU).
func podMTU(cfg Config, agent *overlay.Agent, links *uplinks) (overlayMTU, underlayMTU int) {
	if cfg.MTU != 0 {
		return cfg.MTU, cfg.MTU
	}
	p, err := links.parent()
	if err != nil {
		log.Error(err, "tunnel parent not found; pod interfaces keep the kernel's default MTU")
		return 0, 0
	}
	overlayMTU = overlay.MTUFor(p.MTU, p.IP.Is6())
	underlayMTU = p.MTU
	uplink, err := links.choose(uplinkpkg.VLAN)
	if err != nil {
		log.Error(err, "underlay uplink not found; underlay pods get the overlay's MTU")
		underlayMTU = overlayMTU
	} else if uplink != "" && uplink != p.Link {
		u, err := agent.ResolveParent(overlay.ParentSpec{Name: uplink})
		if err != nil {
			log.Error(err, "underlay uplink not found; underlay pods get the overlay's MTU", "uplink", uplink)
			underlayMTU = overlayMTU
		} else {
			underlayMTU = u.MTU
		}
	}
	if uplink == "" {
		uplink = p.Link
	}
	log.Info("pod MTU", "parent", p.Link, "parentMTU", p.MTU, "overlay", overlayMTU, "uplink", uplink, "underlay", underlayMTU)
	return overlayMTU, underlayMTU
}

func parentSpec(cfg Config) overlay.ParentSpec {
	return overlay.ParentSpec{Name: cfg.VXLANParent, Regex: cfg.VXLANParentRegex}
}

// newBGPPart builds the loop's BGP speakers before the address waiter and
// the CNI server, so an ADD in a BGP network can wait for a session from
// the first one on. Peer passwords are read and the session states
// published through the live client w.
func newBGPPart(cfg Config, w client.Client, events datapath.Events, t *datapath.Trigger) *datapath.BGPPart {
	return datapath.NewBGPPart(datapath.BGPConfig{Node: cfg.NodeName, Client: w, StartSpeaker: datapath.StartBGP,
		Trigger: t, Events: events, Log: log.WithName("datapath")})
}

// loopParts are the loop's parts built before it, and its metrics.
type loopParts struct {
	records  cache.Cache // other nodes' records (remote.NewCache)
	uplinks  *uplinks
	local    datapath.LocalPods
	bgp      *datapath.BGPPart
	fastPath *fastPath   // nil: none
	policy   *policyPart // nil: none
	metrics  *datapath.Metrics
	progress *datapath.Progress
}

// newSyncer builds the data-path loop over the cache and the endpoint
// store, with its parts in the order a pass runs them.
func newSyncer(ctx context.Context, cfg Config, agent *overlay.Agent, ua *underlay.Agent, c cache.Cache,
	w client.Client, eps datapath.Endpoints, t *datapath.Trigger, lp loopParts) (*datapath.Syncer, error) {
	bit, err := datapath.KubeProxyMasqueradeBit(ctx, w, cfg.KubeProxyMasqueradeBit)
	if err != nil {
		log.Error(err, "kube-proxy's masquerade bit not read; assuming its default", "bit", bit)
	}
	log.Info("kube-proxy's masquerade mark is left to kube-proxy", "bit", bit, "mark", fmt.Sprintf("%#x", datapath.MarkOf(bit)))
	l := log.WithName("datapath")
	parts := []datapath.Part{uplinksPart{lp.uplinks}}
	if lp.policy != nil {
		parts = append(parts, lp.policy)
	}
	parts = append(parts,
		datapath.NewVTEPPart(datapath.VTEPConfig{Node: cfg.NodeName, Port: cfg.VXLANPort, Writer: w, Log: l}),
		datapath.NewOverlayPart(datapath.OverlayConfig{Node: cfg.NodeName, KubeProxyMark: datapath.MarkOf(bit), Log: l}, agent),
		datapath.NewUnderlayPart(datapath.UnderlayConfig{Node: cfg.NodeName, Choose: lp.uplinks.choose, Links: agent, Log: l}, ua),
		lp.bgp,
	)
	if lp.fastPath != nil {
		parts = append(parts, datapath.NewFastPathPart(datapath.FastPathConfig{HostVeth: hostVeth, Uplinks: lp.uplinks.underlayLinks}, lp.fastPath))
	}
	opts := datapath.Options{
		Node: cfg.NodeName, Log: l, Metrics: lp.metrics, Progress: lp.progress,
		Parent:     lp.uplinks.parent,
		BeforeRead: []datapath.Part{datapath.NewLocalPodsPart(lp.local, l)},
		Parts:      parts,
	}
	opts.BeforeRead = append(opts.BeforeRead, faultParts(cfg, log)...)
	s, err := datapath.New(ctx, opts, c, lp.records, eps, t)
	if err != nil {
		return nil, fmt.Errorf("data-path loop: %w", err)
	}
	return s, nil
}

func newScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), estuaryv1.AddToScheme(scheme),
		npv1beta1.Install(scheme), npv1alpha1.Install(scheme)); err != nil {
		return nil, fmt.Errorf("build scheme: %w", err)
	}
	return scheme, nil
}

// healthSources are what the health server reports besides health.
type healthSources struct {
	peers     bgpPeers
	fp        *fastPath
	endpoints endpointStore
	metrics   []prometheus.Collector
	// drops are the policy table's logged drops; nil without policy.
	drops *policyVerdicts
	// passes is the data-path loop's progress, for /readyz.
	passes passProgress
}

// newCache builds the cache of the API objects the node needs (every Node,
// Network and Subnet, and this node's IPInstances; other nodes' records
// live in a cache of their own, remote.NewCache; with policy, the pods of
// this node, trimmed by policyPodTransform: the others are policy's peers
// only, read from a view of their own while a policy exists, see
// startPolicy; Nodes trimmed to what the node reads, cachetrim.go) and
// registers the address waiter with it, gated by the node's BGP sessions.
// startCaches starts it once the other informers are registered.
func newCache(ctx context.Context, cfg Config, scheme *runtime.Scheme, live client.Reader,
	sessions ipwait.BGPSessions) (cache.Cache, *ipwait.Waiter, error) {
	opts, err := cacheOptions(cfg.NodeName, scheme)
	if err != nil {
		return nil, nil, err
	}
	c, err := cache.New(cfg.Kube, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("api cache: %w", err)
	}
	w, err := ipwait.New(ctx, c, cfg.NodeName, sessions)
	if err != nil {
		return nil, nil, fmt.Errorf("address waiter: %w", err)
	}
	w.SetDiagnose(ipwait.ManagerEvents(live))
	return c, w, nil
}

// cacheOptions are the options of node's cache (newCache): of the
// IPInstances, the API server sends it node's alone (its node label).
func cacheOptions(node string, scheme *runtime.Scheme) (cache.Options, error) {
	own, err := labels.ValidatedSelectorFromSet(labels.Set{estuaryv1.LabelNode: node})
	if err != nil {
		return cache.Options{}, fmt.Errorf("selector of node %q's records: %w", node, err)
	}
	return cache.Options{Scheme: scheme, DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:           {Transform: policyPodTransform, Field: fields.OneTermEqualSelector("spec.nodeName", node)},
			&corev1.Node{}:          {Transform: nodeTransform},
			&estuaryv1.IPInstance{}: {Label: own},
		}}, nil
}

// startCaches starts caches once every informer is registered, and closes
// parts.synced when every one has synced.
func startCaches(ctx context.Context, parts *running, caches ...cache.Cache) {
	for _, c := range caches {
		parts.goFunc("api cache", func() error { return c.Start(ctx) })
	}
	go func() {
		for _, c := range caches {
			if !c.WaitForCacheSync(ctx) {
				return
			}
		}
		log.Info("api cache synced")
		close(parts.synced)
	}()
}

// startServer opens the CNI server over the node's backend, which plumbs
// pods with plumber; the caller serves it. onChange is called after each
// change of the endpoint store; m records every request; gate, when not
// nil, admits every new endpoint to the node's policy before its ADD
// replies.
func startServer(cfg Config, plumber *podnet.Plumber, addrs cnibackend.Addresses, ready cnibackend.Readiness, onChange func(),
	m *cniserver.Metrics, gate cniserver.PolicyGate) (*cniserver.Server, error) {
	backend, err := cnibackend.New(cnibackend.Config{
		Plumber: plumber, Addresses: addrs, AddressTimeout: cfg.AddressTimeout, MTU: cfg.MTU,
		UnderlayMTU: cfg.UnderlayMTU, Readiness: ready,
	})
	if err != nil {
		return nil, fmt.Errorf("pod network backend: %w", err)
	}
	srv, err := cniserver.New(cniserver.Config{SocketPath: cfg.SocketPath, StatePath: cfg.StatePath, Backend: backend,
		OnChange: onChange, Metrics: m, PolicyGate: gate})
	if err != nil {
		return nil, fmt.Errorf("cni server: %w", err)
	}
	return srv, nil
}

// segmentChecks is the readiness of pods with addresses on a VLAN segment,
// run by the underlay agent on the VLAN networks' uplink (uplinks.go), else
// the tunnel's parent link.
func segmentChecks(links *uplinks, ua *underlay.Agent) *segment.Checks {
	return &segment.Checks{ARP: ua, Uplink: func() (string, error) {
		if name, err := links.choose(uplinkpkg.VLAN); err != nil || name != "" {
			return name, err
		}
		p, err := links.parent()
		if err != nil {
			return "", fmt.Errorf("underlay uplink (the tunnel parent): %w", err)
		}
		return p.Link, nil
	}}
}

// install puts the plugin binary, the reference plugins and the routing
// table names in place, and returns the conflist to install with them (the
// status reporter writes it and keeps it there).
func install(cfg Config, j *journal) (Conflist, error) {
	wrote, err := InstallBinary(cfg.CNIBinarySource, cfg.CNIBinDir)
	if err != nil {
		return Conflist{}, fmt.Errorf("install cni binary: %w", err)
	}
	log.Info("cni binary installed", "from", cfg.CNIBinarySource, "dir", cfg.CNIBinDir, "name", PluginType, "changed", wrote)
	for _, src := range cfg.CNIExtraPlugins {
		if err := j.file(filepath.Join(cfg.CNIBinDir, filepath.Base(src))); err != nil {
			return Conflist{}, fmt.Errorf("install reference plugins: %w", err)
		}
	}
	n, err := InstallPlugins(cfg.CNIExtraPlugins, cfg.CNIBinDir)
	if err != nil {
		return Conflist{}, fmt.Errorf("install reference plugins: %w", err)
	}
	if len(cfg.CNIExtraPlugins) > 0 {
		log.Info("reference plugins installed", "plugins", cfg.CNIExtraPlugins, "dir", cfg.CNIBinDir, "written", n)
	}
	list, err := conflistFor(cfg)
	if err != nil {
		return Conflist{}, err
	}
	if cfg.RTTablesDir != "" {
		if wrote, err = InstallRTTables(cfg.RTTablesDir); err != nil {
			return Conflist{}, fmt.Errorf("install routing table names: %w", err)
		}
		log.Info("routing table names installed", "dir", cfg.RTTablesDir, "name", RTTablesName, "changed", wrote)
	}
	return list, nil
}

// startServing starts the health server and the authenticated metrics
// endpoint, each when an address is configured, over one metrics registry.
// It returns the metrics endpoint's address, "" when none is served.
func startServing(ctx context.Context, cfg Config, parts *running, src healthSources) (string, error) {
	reg := newRegistry(src.peers, src.fastPathProgram(), src.metrics)
	if err := startHealth(ctx, cfg, parts, src, reg); err != nil {
		return "", err
	}
	return startMetrics(ctx, cfg, parts, reg)
}

// startHealth serves /healthz, /readyz, /bgp, /endpoints and reg on /metrics when
// an address is configured.
func startHealth(ctx context.Context, cfg Config, parts *running, src healthSources, reg prometheus.Gatherer) error {
	if cfg.HealthAddr == "" || cfg.HealthAddr == "0" {
		return nil
	}
	h, err := newHealth(cfg.SocketPath)
	if err != nil {
		return err
	}
	h.bgp, h.endpoints, h.node, h.reg = src.peers, src.endpoints, cfg.NodeName, reg
	h.drops = src.drops
	h.passes, h.staleAfter = src.passes, staleBound
	h.metricsLoopbackOnly = cfg.servesMetrics()
	h.pprof = cfg.Pprof
	go func() {
		<-ctx.Done()
		_ = h.conn.Close()
	}()
	go func() {
		select {
		case <-parts.synced:
			h.synced.Store(true)
		case <-ctx.Done():
		}
	}()
	addr, done, err := serveHealth(ctx, cfg.HealthAddr, h)
	if err != nil {
		return err
	}
	parts.goFunc("health probe", func() error { return <-done })
	log.Info("serving health probe", "address", addr, "paths", []string{"/healthz", "/readyz", "/bgp", "/endpoints", "/metrics", PolicyDropsPath})
	return nil
}

// hostVeth names the host side of an endpoint's veth, as podnet made it.
func hostVeth(k endpointstore.Key) string {
	return podnet.HostVethName(k.ContainerID, k.IfName)
}
