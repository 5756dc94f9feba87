package scale

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"
)

// report is everything one run measured.
type report struct {
	started    time.Time
	nodesReady time.Duration
	waves      []wave
	daemon     daemonRun
	topUp      topUp
	cold       coldRun
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func ms(s float64) string {
	if math.IsNaN(s) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f ms", s*1000)
}

// reads and writes split a requests-by-verb (or by-method) map.
func split(m map[string]float64) (reads, writes float64) {
	for k, v := range m {
		switch strings.ToUpper(k) {
		case "GET", "LIST", "WATCH", "WATCHLIST":
			reads += v
		default:
			writes += v
		}
	}
	return reads, writes
}

func perPod(m map[string]float64, pods int) string {
	if len(m) == 0 || pods == 0 {
		return "n/a"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, m[k]/float64(pods)))
	}
	r, w := split(m)
	return fmt.Sprintf("reads %.2f, writes %.2f (%s)", r/float64(pods), w/float64(pods), strings.Join(parts, ", "))
}

func (rep *report) print(out io.Writer, cfg Config) {
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(out, format+"\n", a...) }
	p("")
	p("== estuary at scale: %d fake nodes (kwok), %d pods in Deployments of %d, %s, %d CPUs ==",
		cfg.Nodes, cfg.Pods, cfg.PodsPerDeployment, rep.started.UTC().Format(time.RFC3339), runtime.NumCPU())
	p("fake nodes created to Ready: %s", round(rep.nodesReady))
	for _, w := range rep.waves {
		s := w.storm
		p("-- %s: %d pods --", w.name, s.pods)
		if w.released > 0 {
			p("  deleted pods' addresses released in:   %s", round(w.released))
		}
		p("  pod created -> IPInstance Bound:        %s", s.createdToBound)
		p("  pod created -> scheduled (not estuary): %s", s.createdToScheduled)
		p("  pod scheduled -> IPInstance Bound:      %s", s.scheduledToBound)
		p("  allocation rate: %.1f pods/s over %s (first pod seen to last Bound); sustained %.1f pods/s (10th to 90th percentile of Bound)",
			s.rate, round(s.wall), s.sustained)
		p("  webhook latency (API server): mutating p50 %s p99 %s (%g calls); validating p50 %s p99 %s (%g calls)",
			ms(w.admit.quantile(0.5)), ms(w.admit.quantile(0.99)), w.admit.count,
			ms(w.validate.quantile(0.5)), ms(w.validate.quantile(0.99)), w.validate.count)
		p("  manager API requests per pod: %s", perPod(w.managerReq, s.pods))
		p("  API server requests per pod, every client: %s", perPod(w.apiReq, s.pods))
		p("  CPU per pod, by process (ms): %s", cpuPerPod(w.cpu, s.pods, w.wall))
		if w.managerRestarts != "" {
			p("  manager: %s", w.managerRestarts)
		}
	}
	d := rep.daemon
	if d.kernel.Device == "" {
		return
	}
	p("-- the real node's daemon, %d fake nodes' VTEPs and %d remote addresses --", cfg.Nodes+probeNodes, cfg.Pods)
	p("  RSS %s, peak %s; of the RSS, anonymous %s, files %s (the binary's pages)", mib(d.mem.rss), mib(d.mem.hwm),
		mib(d.mem.anon), mib(d.mem.file))
	if d.daemonLive > 0 && d.managerLive > 0 {
		p("  Go heap live after a forced collection: the daemon %s, the manager %s (%.1f KiB per pod)",
			mib(d.daemonLive), mib(d.managerLive), float64(d.managerLive)/1024/float64(max(cfg.Pods, 1)))
	}
	if d.pass.count > 0 {
		p("  data-path passes: %g in the window, mean %s, p99 %s, all under %s; %g failed",
			d.pass.count, ms(d.pass.sum/d.pass.count), ms(d.pass.quantile(0.99)), ms(d.pass.upperBoundOfMax()), d.passFailures)
	}
	k := d.kernel
	p("  kernel on %s: FDB %d (%d flood), neighbours on it %d, proxy neighbours %d, routes in estuary's tables %d (all tables %d)",
		k.Device, k.FDB, k.FDBFlood, k.Neighbours, k.ProxyNeigh, k.Routes, k.RoutesTotal)
	if len(d.vtepToFDB) > 0 {
		parts := make([]string, 0, len(d.vtepToFDB))
		for _, v := range d.vtepToFDB {
			parts = append(parts, round(v).String())
		}
		p("  new node's VTEP annotation -> its FDB entry: %s", strings.Join(parts, ", "))
	}
	c := rep.cold
	if c.toReady > 0 {
		p("-- manager cold start with %d IPInstances --", c.records)
		if rep.topUp.added > 0 {
			p("  of them %d reservations the run added (kubectl estuary reserve's records) in %s", rep.topUp.added, round(rep.topUp.took))
		}
		p("  process start to leading and ready: %s (kill to the new process: %s, kubelet's restart)", round(c.toReady), round(c.killToUp))
		p("  peak RSS: %s during the storms; %s after the restart (RSS %s)", mib(c.stormPeak.hwm), mib(c.after.hwm), mib(c.after.rss))
		p("  CPU from the kill to ready: %s", cpuByProcess(c.cpu))
		p("  the real node's daemon with the %d records: RSS %s, peak %s; anonymous %s, files %s", c.records,
			mib(c.daemon.rss), mib(c.daemon.hwm), mib(c.daemon.anon), mib(c.daemon.file))
		for _, l := range []string{c.leaseLog, c.rebuiltLog} {
			if l != "" {
				p("  log: %s", l)
			}
		}
	}
}
