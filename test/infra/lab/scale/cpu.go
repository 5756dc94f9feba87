package scale

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// busy are the processes whose CPU a wave accounts for, by command name
// (/proc/<pid>/comm, at most 15 characters): the control plane, kwok,
// estuary and the real node's kubelet and containerd.
var busy = []string{
	"kube-apiserver", "etcd", "kube-scheduler", "kube-controller", "kwok",
	managerName, daemonName, "kubelet", "containerd", "estuary-scale",
}

// cpuSeconds is the user and system CPU time of process pid so far.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("stat of process %d: %w", pid, err)
	}
	return parseCPU(b)
}

// parseCPU reads utime and stime (fields 14 and 15) of a /proc/<pid>/stat
// line, in seconds.
func parseCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat line has no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("stat line has %d fields after the name, want 13 or more", len(f))
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat line: cpu time %q: %w", s, err)
		}
		ticks += v
	}
	return float64(ticks) / clockTicks, nil
}

// cpuNow is, per name in busy, the CPU time of its processes so far,
// keyed by pid so that a process that restarts in between is counted from
// its start.
func cpuNow() map[string]map[int]float64 {
	out := map[string]map[int]float64{}
	for _, name := range busy {
		pids, _ := pidsOf(name)
		out[name] = map[int]float64{}
		for _, pid := range pids {
			if s, err := cpuSeconds(pid); err == nil {
				out[name][pid] = s
			}
		}
	}
	return out
}

// cpuUsed is the CPU time each name used between two cpuNow readings.
func cpuUsed(before, after map[string]map[int]float64) map[string]float64 {
	out := map[string]float64{}
	for name, pids := range after {
		for pid, s := range pids {
			out[name] += s - before[name][pid]
		}
	}
	return out
}

// cpuPerPod says, per process, how much CPU one pod of the wave cost,
// largest first, and the total.
func cpuPerPod(used map[string]float64, pods int, wall time.Duration) string {
	if len(used) == 0 || pods == 0 {
		return "n/a"
	}
	names, total := byUse(used)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f", n, 1000*used[n]/float64(pods)))
	}
	return fmt.Sprintf("%.1f ms in all, %.2f cores over the wave (%s)", 1000*total/float64(pods),
		total/wall.Seconds(), strings.Join(parts, ", "))
}

// cpuByProcess formats CPU-seconds by process, the largest first.
func cpuByProcess(used map[string]float64) string {
	if len(used) == 0 {
		return "n/a"
	}
	names, total := byUse(used)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.1f", n, used[n]))
	}
	return fmt.Sprintf("%.1f s in all (%s)", total, strings.Join(parts, ", "))
}

// byUse returns the processes that used CPU, the largest first, and the
// total.
func byUse(used map[string]float64) (names []string, total float64) {
	for n, s := range used {
		if s > 0 {
			names = append(names, n)
			total += s
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		switch {
		case used[a] > used[b]:
			return -1
		case used[a] < used[b]:
			return 1
		}
		return strings.Compare(a, b)
	})
	return names, total
}

// profileAPIServer saves a CPU profile of kube-apiserver, taken over
// seconds from after delay, to dir/apiserver-<name>.pprof; `go tool pprof
// -top` reads it (the server names the functions).
func (r *run) profileAPIServer(ctx context.Context, dir, name string, delay time.Duration, seconds int) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(delay):
	}
	b, err := r.cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(seconds)).DoRaw(ctx)
	if err != nil {
		r.logf("kube-apiserver profile: %v", err)
		return
	}
	path := filepath.Join(dir, "apiserver-"+name+".pprof")
	if err := os.WriteFile(path, b, 0o644); err != nil { //nolint:gosec // G306: a profile, no secret
		r.logf("kube-apiserver profile: %v", err)
		return
	}
	r.logf("kube-apiserver profile (%d s, from %s into the wave): %s", seconds, delay, path)
}

// Where the run asks estuary for Go's profiles, on the real node's
// loopback: the manager with --pprof-bind-address, the daemon's health
// server with --pprof.
const (
	managerPprof = "127.0.0.1:9784"
	daemonPprof  = "127.0.0.1:9782"
)

// liveHeap is the Go heap of the process serving pprof at addr right
// after a collection it forces: HeapAlloc as the heap profile's debug
// output reports it. A process's RSS says what its collector let the heap
// grow to (up to GOMEMLIMIT); this says what it holds.
func (r *run) liveHeap(ctx context.Context, addr string) (int64, error) {
	hc := nsClient("/var/run/netns/"+r.cfg.NodeNetns, time.Minute)
	code, body, err := get(ctx, hc, "http://"+addr+"/debug/pprof/heap?gc=1&debug=1", "")
	if err == nil && code != 200 {
		err = fmt.Errorf("HTTP %d: %s", code, strings.TrimSpace(body))
	}
	if err != nil {
		return 0, fmt.Errorf("heap of %s: %w", addr, err)
	}
	return heapAlloc(body)
}

// heapAlloc reads "# HeapAlloc = N" from a heap profile's debug output.
func heapAlloc(text string) (int64, error) {
	for line := range strings.Lines(text) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "# HeapAlloc = "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return 0, fmt.Errorf("HeapAlloc %q: %w", v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("no HeapAlloc line in %d bytes of heap profile", len(text))
}

// saveProfile fetches http://addr/debug/pprof/<what> from inside the real
// node's network namespace into dir/<name>.pprof, and logs the outcome.
func (r *run) saveProfile(ctx context.Context, name, addr, what string, timeout time.Duration) {
	if err := r.fetchProfile(ctx, name, addr, what, timeout); err != nil {
		r.logf("profile %s: %v", name, err)
		return
	}
	r.logf("profile %s: %s", name, filepath.Join(r.cfg.ProfileDir, name+".pprof"))
}

func (r *run) fetchProfile(ctx context.Context, name, addr, what string, timeout time.Duration) error {
	hc := nsClient("/var/run/netns/"+r.cfg.NodeNetns, timeout)
	code, body, err := get(ctx, hc, "http://"+addr+"/debug/pprof/"+what, "")
	if err == nil && code != 200 {
		err = fmt.Errorf("HTTP %d: %s", code, strings.TrimSpace(body))
	}
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(r.cfg.ProfileDir, name+".pprof"), []byte(body), 0o644) //nolint:gosec // G306: a profile, no secret
}

// profileColdStart takes a CPU profile of the restarted manager from as
// soon as its profile port answers (its first second), over seconds; done
// is closed when it is saved or given up.
func (r *run) profileColdStart(ctx context.Context, seconds int) (done <-chan struct{}) {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		what := fmt.Sprintf("profile?seconds=%d", seconds)
		timeout := time.Duration(seconds+10) * time.Second
		var err error
		for range 100 {
			if err = r.fetchProfile(ctx, "manager-cold-start-cpu", managerPprof, what, timeout); err == nil {
				r.logf("profile manager-cold-start-cpu (%d s from the new process's first second): %s", seconds,
					filepath.Join(r.cfg.ProfileDir, "manager-cold-start-cpu.pprof"))
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		r.logf("profile manager-cold-start-cpu: %v", err)
	}()
	return ch
}
