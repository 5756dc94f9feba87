package daemon

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/cnibackend"
	"github.com/estuary-cni/estuary/internal/cnibackend/ipwait"
	"github.com/estuary-cni/estuary/internal/cniserver"
	"github.com/estuary-cni/estuary/internal/daemon/datapath"
	"github.com/estuary-cni/estuary/internal/daemon/remote"
	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
	"github.com/estuary-cni/estuary/internal/dataplane/podnet"
	"github.com/estuary-cni/estuary/internal/dataplane/underlay"
	"github.com/estuary-cni/estuary/internal/lifecycle"
	"github.com/estuary-cni/estuary/internal/sysctl"
)

// components are the daemon's parts. Each is built by its start hook
// (hooks) from the parts built before it, and released by its stop hook.
type components struct {
	cfg Config
	// parts are the daemon's goroutines; cancel ends their context.
	parts  *running
	cancel context.CancelFunc

	// k are the kernel's handles: the host's sysctls, the fast path, the
	// data planes and the local-pods table.
	k kernelHandles
	// live is the one live client: the Node patches and BGP Secret reads of
	// the loop, and the event reads that explain a timed-out ADD.
	live     client.Client
	events   *nodeEvents
	trigger  *datapath.Trigger
	speakers *datapath.BGPPart
	cache    cache.Cache
	waiter   *ipwait.Waiter
	records  cache.Cache // other nodes' records (remote.NewCache)
	policy   *policyPart // nil: network policy off
	metrics  daemonMetrics
	plumber  *podnet.Plumber
	srv      *cniserver.Server
	progress *datapath.Progress
	syncer   *datapath.Syncer
	status   *statusReporter
}

// kernelHandles are the daemon's handles on the host's kernel, opened and
// closed by their hooks; cfg is the daemon's, whose pod MTUs the data
// planes set.
type kernelHandles struct {
	cfg      *Config
	journal  *journal
	fp       *fastPath
	fpStatus estuaryv1.NodeFastPathStatus
	overlay  *overlay.Agent
	underlay *underlay.Agent
	table    *podnet.LocalPods
	uplinks  *uplinks // the node's link per mode, over overlay
}

// hooks are the daemon's components in start order; they stop in reverse.
// The goroutines stop after the API and data-plane handles are released
// and before the fast path and the sysctl journal.
func (d *components) hooks() []lifecycle.Hook {
	return []lifecycle.Hook{
		{Name: "sysctl journal", Start: d.k.openJournal, Stop: d.k.closeJournal},
		{Name: "node sysctls", Start: d.k.writeSysctls},
		{Name: "fast path", Start: d.k.openFastPath, Stop: d.k.closeFastPath},
		{Name: "goroutines", Stop: d.stopGoroutines},
		{Name: "data planes", Start: d.k.openDataPlanes, Stop: d.k.closeDataPlanes},
		{Name: "node events", Start: d.openEvents, Stop: d.closeEvents},
		{Name: "api caches", Start: d.buildCaches},
		{Name: "network policy", Start: d.openPolicy, Stop: d.closePolicy},
		{Name: "api cache start", Start: d.startCaches},
		{Name: "local pods table", Start: d.k.openLocalPods, Stop: d.k.closeLocalPods},
		{Name: "cni server", Start: d.openServer, Stop: d.closeServer},
		{Name: "endpoint recovery", Start: d.recoverEndpoints},
		{Name: "data-path loop", Start: d.buildLoop},
		{Name: "node loops", Start: d.runLoops},
		{Name: "plugin install", Start: d.install},
		{Name: "daemon status", Start: d.runStatus},
		{Name: "health and metrics", Start: d.serve},
	}
}

func (d *kernelHandles) openJournal(context.Context) error {
	j, err := openOrResetJournal(d.cfg.stateDir(), d.cfg.HostNetns)
	if err != nil {
		return err
	}
	d.journal = j
	sysctl.SetRecorder(j)
	return nil
}

func (d *kernelHandles) closeJournal(context.Context) error {
	sysctl.SetRecorder(nil)
	return nil
}

func (d *kernelHandles) writeSysctls(context.Context) error {
	if err := sysctl.Write(d.cfg.HostNetns, nodeSysctls); err != nil {
		return fmt.Errorf("node sysctls: %w", err)
	}
	log.Info("node sysctls set", "sysctls", sysctl.List(nodeSysctls))
	return nil
}

func (d *kernelHandles) openFastPath(context.Context) (err error) {
	d.fp, d.fpStatus, err = startFastPath(*d.cfg)
	return err
}

// closeFastPath detaches nothing: the program stays, so pods keep their
// fast path while the daemon restarts (fastPath.Close).
func (d *kernelHandles) closeFastPath(context.Context) error {
	_ = d.fp.Close()
	return nil
}

// stopGoroutines ends the goroutines' context and waits for every one.
func (d *components) stopGoroutines(context.Context) error {
	d.cancel()
	d.parts.wait()
	return nil
}

// openDataPlanes opens the overlay and underlay data planes on the host
// network namespace and sets the pods' MTU from the links they see.
func (d *kernelHandles) openDataPlanes(context.Context) (err error) {
	if d.overlay, err = overlay.NewAgent(d.cfg.HostNetns); err != nil {
		return fmt.Errorf("overlay data plane: %w", err)
	}
	if d.underlay, err = underlay.NewAgent(d.cfg.HostNetns); err != nil {
		d.overlay.Close()
		return fmt.Errorf("underlay data plane: %w", err)
	}
	d.uplinks = newUplinks(*d.cfg, d.overlay)
	d.cfg.MTU, d.cfg.UnderlayMTU = podMTU(*d.cfg, d.overlay, d.uplinks)
	return nil
}

// closeDataPlanes releases their namespace handles; the kernel state stays.
func (d *kernelHandles) closeDataPlanes(context.Context) error {
	d.underlay.Close()
	d.overlay.Close()
	return nil
}

// openEvents opens the live client and the Events on the node's Node
// written through it.
func (d *components) openEvents(context.Context) error {
	scheme, err := newScheme()
	if err != nil {
		return err
	}
	if d.live, err = client.New(d.cfg.Kube, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("api client: %w", err)
	}
	d.events = newNodeEvents(d.live, d.cfg.NodeName)
	return nil
}

// closeEvents writes the Events still pending, for publishTimeout at most.
func (d *components) closeEvents(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	d.events.close(ctx)
	return nil
}

// buildCaches builds the BGP speakers, the API cache with the address
// waiter over it, and the cache of the other nodes' records; startCaches
// starts them once every informer is registered.
func (d *components) buildCaches(ctx context.Context) (err error) {
	d.trigger = datapath.NewTrigger()
	d.speakers = newBGPPart(d.cfg, d.live, d.events, d.trigger)
	if d.cache, d.waiter, err = newCache(ctx, d.cfg, d.live.Scheme(), d.live, d.speakers); err != nil {
		return err
	}
	d.records, err = remote.NewCache(d.cfg.Kube, d.cfg.NodeName)
	return err
}

func (d *components) openPolicy(ctx context.Context) (err error) {
	d.policy, err = startPolicy(ctx, d.cfg, d.live.Scheme(), d.live, d.cache, d.trigger)
	return err
}

func (d *components) closePolicy(context.Context) error {
	d.policy.Close()
	return nil
}

func (d *components) startCaches(ctx context.Context) error {
	startCaches(ctx, d.parts, d.cache, d.records)
	return nil
}

func (d *kernelHandles) openLocalPods(context.Context) (err error) {
	d.table, err = podnet.NewLocalPods(d.cfg.HostNetns)
	return err
}

func (d *kernelHandles) closeLocalPods(context.Context) error {
	d.table.Close()
	return nil
}

// openServer opens the CNI server on its socket with its endpoint store;
// runLoops serves it.
func (d *components) openServer(context.Context) (err error) {
	d.metrics = newDaemonMetrics()
	d.plumber = podnet.NewPlumber(d.cfg.HostNetns)
	d.srv, err = startServer(d.cfg, d.plumber, d.waiter, segmentChecks(d.k.uplinks, d.k.underlay), d.trigger.Poke,
		d.metrics.cni, d.policy.gate())
	if err != nil {
		return err
	}
	d.policy.admitFrom(d.srv.Store())
	log.Info("cni server listening", "socket", d.cfg.SocketPath, "state", d.cfg.StatePath)
	return nil
}

// closeServer stops serving, removes the socket and closes the store.
func (d *components) closeServer(context.Context) error {
	return d.srv.Close()
}

func (d *components) recoverEndpoints(ctx context.Context) error {
	return recoverEndpoints(ctx, d.cfg, d.srv.Store(), d.plumber, d.cache, d.parts)
}

func (d *components) buildLoop(ctx context.Context) (err error) {
	local := cnibackend.NewLocalPods(d.k.table, d.srv.Store(), d.srv.Busy)
	d.progress = datapath.NewProgress()
	d.syncer, err = newSyncer(ctx, d.cfg, d.k.overlay, d.k.underlay, d.cache, d.live, d.srv.Store(), d.trigger, loopParts{
		records: d.records, uplinks: d.k.uplinks, local: local, bgp: d.speakers, fastPath: d.k.fp, policy: d.policy,
		metrics: d.metrics.datapath, progress: d.progress})
	return err
}

// runLoops serves the CNI server and runs the data-path loop, the kernel
// link watch that wakes it and the node's endpoint collector.
func (d *components) runLoops(ctx context.Context) error {
	d.parts.goFunc("cni server", d.srv.Serve)
	d.parts.goFunc("data-path loop", func() error { return d.syncer.Run(ctx) })
	kernel := datapath.KernelWatch{Netns: d.cfg.HostNetns, Uplinks: d.k.uplinks.watched, Parent: parentSpec(d.cfg),
		Links: tunnelParent{d.k.uplinks}, Log: log.WithName("datapath")}
	d.parts.goFunc("kernel link watch", func() error { return kernel.Run(ctx, d.trigger) })
	gc := newNodeGC(d.srv.Store(), d.srv, d.live, d.cfg.GCGrace)
	d.parts.goFunc("node gc", func() error { return gc.run(ctx, d.cfg.GCInterval) })
	return nil
}

// install puts the plugin in place and writes its conflist, which the
// status reporter keeps there.
func (d *components) install(ctx context.Context) error {
	d.status = &statusReporter{node: d.cfg.NodeName, reader: d.cache, writer: d.live, events: d.events,
		dir: d.cfg.CNIConfDir, fastPath: d.k.fpStatus, kubeProxyMode: proxyModeOf(d.cfg), passes: d.progress, uplinks: d.k.uplinks.status,
		staleAfter: staleBound, interval: statusInterval}
	list, err := install(d.cfg, d.k.journal)
	if err != nil {
		return err
	}
	d.status.list = list
	return d.status.installConflist(ctx)
}

// runStatus publishes the daemon's status on its Node.
func (d *components) runStatus(ctx context.Context) error {
	d.parts.goFunc("daemon status", func() error { return d.status.run(ctx, d.parts.synced) })
	return nil
}

// serve serves health and metrics.
func (d *components) serve(ctx context.Context) error {
	_, err := startServing(ctx, d.cfg, d.parts, healthSources{peers: d.speakers.BGPPeers, fp: d.k.fp,
		endpoints: d.srv.Store(), passes: d.progress, metrics: append(d.metrics.collectors(), d.policy.collectors()...),
		drops: d.policy.drops()})
	return err
}

// wait waits for ctx's end, or the first failure of a goroutine, which it
// returns.
func (d *components) wait(ctx context.Context) error {
	select {
	case <-ctx.Done():
		log.Info("stopping")
		return nil
	case err := <-d.parts.failed:
		return err
	}
}
