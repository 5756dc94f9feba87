package scale

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/estuary-cni/estuary/internal/dataplane/overlay"
)

// wave is one storm's measurements.
type wave struct {
	name     string
	storm    storm
	admit    histogram // the API server's view of the webhooks, by type
	validate histogram
	// the manager's own API requests (rest_client_requests_total) by
	// method, and the API server's requests from every client by verb.
	managerReq map[string]float64
	apiReq     map[string]float64
	released   time.Duration // churn only: deletion to every address released
	// cpu: CPU time per process (by command name) over the wave, from its
	// start to its last pod Bound (wall).
	cpu  map[string]float64
	wall time.Duration
	// managerRestarts: the manager's restarts as the wave ended (the
	// cold start's own restart comes after the waves).
	managerRestarts string
}

// A wave of at least profileFrom pods has kube-apiserver profiled for
// profileSeconds, profileDelay after its start (the storm at full pace).
const (
	profileFrom    = 2000
	profileDelay   = 40 * time.Second
	profileSeconds = 30
)

// storms creates the Deployments, then deletes and re-creates a tenth of
// them, and measures each wave.
func (r *run) storms(ctx context.Context, rep *report) error {
	n := (r.cfg.Pods + r.cfg.PodsPerDeployment - 1) / r.cfg.PodsPerDeployment
	var deps []*appsv1.Deployment
	left := r.cfg.Pods
	for i := range n {
		reps := min(left, r.cfg.PodsPerDeployment)
		left -= reps
		deps = append(deps, deployment(r.cfg.Namespace, fmt.Sprintf("d-%03d", i), i, int32(reps))) //nolint:gosec // G115: at most PodsPerDeployment
	}
	first, err := r.wave(ctx, "create", "d-", r.cfg.Pods, func() error {
		return createDeployments(ctx, r.c, deps, workers)
	})
	rep.waves = append(rep.waves, first)
	if err != nil {
		return err
	}

	var churn, again []*appsv1.Deployment
	churned := 0
	for i, d := range deps {
		if i%10 == 0 {
			churn = append(churn, d)
			churned += int(*d.Spec.Replicas)
			again = append(again, deployment(r.cfg.Namespace, fmt.Sprintf("r-%03d", i), i, *d.Spec.Replicas))
		}
	}
	t0 := time.Now()
	if err := deleteDeployments(ctx, r.c, churn, workers); err != nil {
		return err
	}
	if err := r.waitFor(ctx, fmt.Sprintf("%d addresses released", churned), func() (bool, string, error) {
		b := r.tr.boundNow()
		return b <= r.cfg.Pods-churned, fmt.Sprintf("%d Bound", b), nil
	}); err != nil {
		return err
	}
	released := time.Since(t0)
	r.logf("a tenth deleted: %d addresses released in %s", churned, round(released))
	w, err := r.wave(ctx, "re-create a tenth", "r-", churned, func() error {
		return createDeployments(ctx, r.c, again, workers)
	})
	w.released = released
	rep.waves = append(rep.waves, w)
	return err
}

// wave runs start, waits until want pods whose names begin with prefix
// hold a Bound address, and measures it.
func (r *run) wave(ctx context.Context, name, prefix string, want int, start func() error) (wave, error) {
	w := wave{name: name}
	a0, err := r.apiMetrics(ctx)
	if err != nil {
		return w, err
	}
	m0, err := r.estuaryMetrics(ctx, r.cfg.ManagerMetrics)
	if err != nil {
		return w, err
	}
	match := func(k string) bool { return strings.HasPrefix(k, r.cfg.Namespace+"/"+prefix) }
	r.logf("%s: %d pods", name, want)
	cpu0 := cpuNow()
	t0 := time.Now()
	if r.cfg.ProfileDir != "" && want >= profileFrom {
		pctx, stop := context.WithCancel(ctx)
		defer stop()
		go r.profileAPIServer(pctx, r.cfg.ProfileDir, strings.ReplaceAll(name, " ", "-"), profileDelay, profileSeconds)
	}
	if err := start(); err != nil {
		return w, err
	}
	err = r.waitFor(ctx, fmt.Sprintf("%s: %d pods with a Bound address", name, want), func() (bool, string, error) {
		b := r.tr.boundAmong(match)
		return b >= want, fmt.Sprintf("%d Bound", b), nil
	})
	w.wall, w.cpu = time.Since(t0), cpuUsed(cpu0, cpuNow())
	w.storm = stormOf(r.tr.times(match))
	r.logf("%s: %d addresses Bound in %s", name, w.storm.pods, round(time.Since(t0)))
	a1, aerr := r.apiMetrics(ctx)
	m1, merr := r.estuaryMetrics(ctx, r.cfg.ManagerMetrics)
	if aerr == nil {
		const h = "apiserver_admission_webhook_admission_duration_seconds"
		w.admit = a1.histogramOf(h, map[string]string{"type": "admit"}).minus(a0.histogramOf(h, map[string]string{"type": "admit"}))
		w.validate = a1.histogramOf(h, map[string]string{"type": "validating"}).minus(a0.histogramOf(h, map[string]string{"type": "validating"}))
		w.apiReq = minus(a1.byLabel("apiserver_request_total", "verb", nil), a0.byLabel("apiserver_request_total", "verb", nil))
	}
	if merr == nil {
		w.managerReq = minus(m1.byLabel("rest_client_requests_total", "method", nil), m0.byLabel("rest_client_requests_total", "method", nil))
	} else {
		// A manager that restarted during the wave: its counters started
		// again, so there is no delta to report; the run goes on.
		r.logf("%s: the manager's metrics after the wave: %v", name, merr)
	}
	if rs, rerr := r.managerRestarts(ctx); rerr == nil {
		w.managerRestarts = rs
	}
	if err != nil {
		return w, err
	}
	return w, aerr
}

func minus(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range a {
		if d := v - b[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// daemonRun is what was measured of the real node's daemon.
type daemonRun struct {
	mem memory
	// live heaps after a forced collection, of the daemon and the manager,
	// once the storms are over (profiling on only)
	daemonLive, managerLive int64
	kernel                  kernel
	pass                    histogram // passes between two scrapes, periodic resync included
	vtepToFDB               []time.Duration
	passFailures            float64
}

// daemon measures the real node's daemon with every fake node and pod in
// place: the VTEP of new nodes to their FDB entry, the passes over a
// window that holds at least one periodic resync, its memory and what it
// programmed.
func (r *run) daemon(ctx context.Context, rep *report) error {
	d := &rep.daemon
	dev, err := vxlanDevice(ctx, r.cfg.NodeNetns)
	if err != nil {
		return err
	}
	want := r.cfg.Nodes
	if err := r.waitFor(ctx, fmt.Sprintf("FDB entries for %d fake nodes on the real node", want), func() (bool, string, error) {
		k, err := readKernel(ctx, r.cfg.NodeNetns, dev)
		return k.FDB-k.FDBFlood >= want, fmt.Sprintf("%d unicast FDB entries", k.FDB-k.FDBFlood), err
	}); err != nil {
		return err
	}
	const hist = "estuary_datapath_reconcile_duration_seconds"
	s0, err := r.estuaryMetrics(ctx, r.cfg.DaemonMetrics)
	if err != nil {
		return err
	}
	t0 := time.Now()
	profiled := make(chan struct{})
	go func() {
		defer close(profiled)
		if r.cfg.ProfileDir != "" {
			r.saveProfile(ctx, "daemon-cpu", daemonPprof, "profile?seconds=30", 45*time.Second)
		}
	}()
	for j := range probeNodes {
		i := r.cfg.Nodes + j
		start := time.Now()
		if err := createNodes(ctx, r.c, i, i+1, 1); err != nil {
			return err
		}
		mac := overlay.StableMAC(fakeNodeName(i)).String()
		if err := r.waitFor(ctx, "the FDB entry of "+fakeNodeName(i), func() (bool, string, error) {
			ok, err := hasFDB(ctx, r.cfg.NodeNetns, dev, mac)
			return ok, "absent", err
		}); err != nil {
			return err
		}
		d.vtepToFDB = append(d.vtepToFDB, time.Since(start))
		r.logf("VTEP of %s to its FDB entry on the real node: %s", fakeNodeName(i), round(time.Since(start)))
	}
	var s1 samples
	if err := r.waitFor(ctx, "a periodic data-path pass", func() (bool, string, error) {
		var err error
		s1, err = r.estuaryMetrics(ctx, r.cfg.DaemonMetrics)
		if err != nil {
			return false, "", err
		}
		n := s1.histogramOf(hist, nil).count - s0.histogramOf(hist, nil).count
		return time.Since(t0) > 35*time.Second && n > float64(probeNodes), fmt.Sprintf("%g passes", n), nil
	}); err != nil {
		return err
	}
	<-profiled
	if r.cfg.ProfileDir != "" {
		r.saveProfile(ctx, "daemon-heap", daemonPprof, "heap?gc=1", time.Minute)
		r.saveProfile(ctx, "manager-heap", managerPprof, "heap?gc=1", time.Minute)
		if d.daemonLive, err = r.liveHeap(ctx, daemonPprof); err != nil {
			r.logf("daemon's live heap: %v", err)
		}
		if d.managerLive, err = r.liveHeap(ctx, managerPprof); err != nil {
			r.logf("manager's live heap: %v", err)
		}
	}
	d.pass = s1.histogramOf(hist, map[string]string{"result": "success"}).minus(s0.histogramOf(hist, map[string]string{"result": "success"}))
	d.passFailures = s1.histogramOf(hist, map[string]string{"result": "error"}).count - s0.histogramOf(hist, map[string]string{"result": "error"}).count
	if d.kernel, err = readKernel(ctx, r.cfg.NodeNetns, dev); err != nil {
		return err
	}
	d.mem, err = r.daemonMemory()
	return err
}

// daemonMemory is the real node's daemon's memory now.
func (r *run) daemonMemory() (memory, error) {
	pid, err := onePid(daemonName)
	if err != nil {
		return memory{}, err
	}
	return memoryOf(pid)
}

// coldRun is the manager's restart with every record in place.
type coldRun struct {
	stormPeak  memory // the manager that ran the storms, before it was killed
	daemon     memory // the real node's daemon with every record in place
	records    int
	toReady    time.Duration      // process start to elected and ready
	killToUp   time.Duration      // kill to the new process's start (kubelet's restart)
	after      memory             // the restarted manager, once ready
	cpu        map[string]float64 // CPU-seconds by process, from the kill to ready
	leaseLog   string
	rebuiltLog string
}

// coldStart kills the manager, deletes its Lease so that the new process
// leads at once, and times its start to ready (its new Lease holder and
// /readyz, which is the allocator rebuilt once it leads).
func (r *run) coldStart(ctx context.Context, rep *report) error {
	c := &rep.cold
	var err error
	if c.records, err = r.countRecords(ctx); err != nil {
		return err
	}
	if c.daemon, err = r.daemonMemory(); err != nil {
		return err
	}
	old, err := onePid(managerName)
	if err != nil {
		return err
	}
	if c.stormPeak, err = memoryOf(old); err != nil {
		return err
	}
	holder, err := r.leaseHolder(ctx)
	if err != nil {
		return err
	}
	cpu0, killed := cpuNow(), time.Now()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill manager %d: %w", old, err)
	}
	if err := r.deleteManagerLease(ctx); err != nil {
		return err
	}
	var pid int
	if err := r.waitFor(ctx, "a new manager process", func() (bool, string, error) {
		pids, err := pidsOf(managerName)
		for _, p := range pids {
			if p != old {
				pid = p
			}
		}
		return pid != 0, fmt.Sprintf("%v", pids), err
	}); err != nil {
		return err
	}
	started, err := startTime(pid)
	if err != nil {
		return err
	}
	c.killToUp = started.Sub(killed)
	if r.cfg.ProfileDir != "" {
		profiled := r.profileColdStart(ctx, 20)
		defer func() { <-profiled }()
		apiserver := make(chan struct{})
		go func() { defer close(apiserver); r.profileAPIServer(ctx, r.cfg.ProfileDir, "cold-start", 0, 15) }()
		defer func() { <-apiserver }()
	}
	hc := nsClient("/var/run/netns/"+r.cfg.NodeNetns, 2*time.Second)
	u := fmt.Sprintf("http://%s:%d/readyz", r.cfg.NodeAddr, r.cfg.ManagerHealth)
	if err := r.waitFor(ctx, "the restarted manager leading and ready", func() (bool, string, error) {
		h, err := r.leaseHolder(ctx)
		if err != nil || h == "" || h == holder {
			return false, "lease holder " + h, err
		}
		code, body, err := get(ctx, hc, u, "")
		if err != nil {
			return false, "", nil //nolint:nilerr // not listening yet
		}
		return code == 200, fmt.Sprintf("readyz %d %s", code, strings.TrimSpace(body)), nil
	}); err != nil {
		return err
	}
	c.toReady, c.cpu = time.Since(started), cpuUsed(cpu0, cpuNow())
	r.logf("manager restarted: process start to leading and ready in %s", round(c.toReady))
	if c.leaseLog, err = r.managerLogLine(ctx, "successfully acquired lease"); err != nil {
		r.logf("manager log: %v", err)
	}
	if c.rebuiltLog, err = r.managerLogLine(ctx, "allocator rebuilt"); err != nil {
		r.logf("manager log: %v", err)
	}
	c.after, err = memoryOf(pid)
	return err
}
