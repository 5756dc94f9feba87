//go:build integration

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	types100 "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/estuary-cni/estuary/internal/daemon"
	"github.com/estuary-cni/estuary/internal/nsrun"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

const (
	// benchSeq and benchConc are the ADDs per plugin of one sequential and
	// one concurrent run.
	benchSeq  = 200
	benchConc = 50
	// benchBatch is the length of one sequential batch; the two plugins'
	// batches alternate A B B A so that drift in the machine's load and the
	// growing number of links in the host namespace hit both alike.
	benchBatch = 50
	// benchFloor is the number of VERSION calls per plugin of exec-floor.
	benchFloor = 50

	benchOverlayCIDR = "10.200.0.0/16"
	// refDir holds Debian's containernetworking-plugins.
	refDir    = "/usr/lib/cni"
	refSubnet = "10.201.0.0/16"
	refName   = "estbench"
)

// cniPlugin is a plugin binary with the configuration a runtime would pass.
type cniPlugin struct {
	name  string
	bin   string
	path  string // CNI_PATH
	stdin []byte
}

// attachment is the target of one ADD and its DEL.
type attachment struct {
	id    string
	netns string
	pod   *corev1.Pod
	want  netip.Addr // the pod's bound address
}

// call is one execution of a plugin binary.
type call struct {
	took           time.Duration // from exec to exit
	stdout, stderr []byte
	err            error
}

// timings are one plugin's latencies in one run, or pooled over runs.
type timings struct{ add, del []time.Duration }

// cniBench is the node shared by the sub-benchmarks of BenchmarkCNIAdd.
type cniBench struct {
	host      string
	hostLocal string // host-local's dataDir
	est, ref  cniPlugin
	pods      []attachment // pod and want only
	runs      int
	pooled    map[string]*timings // by "<mode>/<plugin>"
}

// BenchmarkCNIAdd measures the latency of CNI ADD (and DEL) on one node
// whose pods' IPInstances are already Bound: the real estuary-cni binary
// talking to the daemon (in this process, against a fake host namespace),
// and in the same run the reference ptp plugin with host-local IPAM doing
// the same work (a veth pair, the pod's address, a host route). Each binary
// is exec'd from a thread inside the fake host namespace with the CNI
// environment and stdin a runtime gives it, into a fresh network namespace
// per ADD. Each call is timed from exec to exit.
//
// exec-floor times VERSION (process start and exit only); sequential runs
// benchSeq ADDs per plugin one after another in alternating batches, then
// the DELs; concurrent starts benchConc ADDs per plugin at once, then their
// DELs. Each reports the nearest-rank p50 and p99 of ADD per plugin and
// their ratio estuary/reference, and the p50 of DEL.
func BenchmarkCNIAdd(b *testing.B) {
	requirements(b)
	for _, p := range []string{"ptp", "host-local"} {
		if _, err := os.Stat(filepath.Join(refDir, p)); err != nil {
			b.Skipf("reference plugin %s is not installed (Debian containernetworking-plugins): %v", p, err)
		}
	}
	cb := newCNIBench(b)
	b.Run("exec-floor", cb.execFloor)
	b.Run("sequential", cb.sequential)
	b.Run("concurrent", cb.concurrent)
	cb.logPooled()
}

// newCNIBench starts the API server, the manager's controllers and the
// daemon, creates the pods and waits until each has its Bound IPInstance.
func newCNIBench(b *testing.B) *cniBench {
	b.Helper()
	cfg, k8s := startAPIServer(b, true)
	startManager(b, cfg, k8s.Scheme())
	overlay(b, k8s, "bench-overlay", benchOverlayCIDR)

	dir := b.TempDir()
	cb := &cniBench{host: fakeHost(b), hostLocal: filepath.Join(dir, "host-local"), pooled: map[string]*timings{}}
	dcfg := daemon.Config{
		NodeName:        nodeName,
		Kube:            cfg,
		SocketPath:      filepath.Join(dir, "run", "cni.sock"),
		StatePath:       filepath.Join(dir, "lib", "state.db"),
		CNIBinDir:       filepath.Join(dir, "opt", "cni", "bin"),
		CNIConfDir:      filepath.Join(dir, "etc", "cni", "net.d"),
		CNIBinarySource: buildCNI(b),
		AddressTimeout:  10 * time.Second,
		HostNetns:       cb.host,
		HealthAddr:      "0",
	}
	policy := os.Getenv("BENCH_POLICY") == "1"
	dcfg.NetworkPolicy = policy
	benchDaemon(b, dcfg)
	raw, err := os.ReadFile(filepath.Join(dcfg.CNIConfDir, daemon.ConflistName))
	if err != nil {
		b.Fatal(err)
	}
	var list daemon.Conflist
	if err := json.Unmarshal(raw, &list); err != nil {
		b.Fatalf("conflist %s: %v", raw, err)
	}
	stdin, err := list.PluginConfig(daemon.PluginType)
	if err != nil {
		b.Fatal(err)
	}
	cb.est = cniPlugin{name: "estuary", bin: filepath.Join(dcfg.CNIBinDir, daemon.PluginType), path: dcfg.CNIBinDir, stdin: stdin}
	cb.ref = cniPlugin{name: "ptp+host-local", bin: filepath.Join(refDir, "ptp"), path: refDir, stdin: []byte(fmt.Sprintf(
		`{"cniVersion":"1.0.0","name":%q,"type":"ptp","ipam":{"type":"host-local","subnet":%q,"dataDir":%q}}`,
		refName, refSubnet, cb.hostLocal))}

	pods := make([]*corev1.Pod, benchSeq+benchConc)
	for i := range pods {
		pods[i] = newPod(b, k8s, fmt.Sprintf("bench-%d", i))
		if policy {
			denyIngress(b, k8s, pods[i].Namespace)
		}
	}
	for _, p := range pods {
		ipi := boundAddress(b, k8s, p)
		want, err := netip.ParsePrefix(ipi.Spec.Address.IP)
		if err != nil {
			b.Fatalf("ipinstance %s: address %q: %v", ipi.Name, ipi.Spec.Address.IP, err)
		}
		cb.pods = append(cb.pods, attachment{pod: p, want: want.Addr()})
	}
	// The warm-up pod is bound after all the others, so once the daemon
	// serves it, its cache holds every other pod's IPInstance too. The
	// warm-up also brings both plugins' binaries into the page cache.
	wp := newPod(b, k8s, "bench-warmup")
	if policy {
		denyIngress(b, k8s, wp.Namespace)
	}
	ipi := boundAddress(b, k8s, wp)
	warm := attachment{pod: wp, want: netip.MustParsePrefix(ipi.Spec.Address.IP).Addr()}
	for _, p := range []cniPlugin{cb.est, cb.ref} {
		a := warm
		a.id, a.netns = "bench-warmup-"+strings.Split(p.name, "+")[0], nstest.New(b)
		cb.check(b, p, "ADD", []attachment{a}, []call{p.exec(cb.host, "ADD", a, nil, nil)})
		cb.check(b, p, "DEL", []attachment{a}, []call{p.exec(cb.host, "DEL", a, nil, nil)})
	}
	return cb
}

// exec runs the plugin for a from a new thread inside host, as a runtime on
// the node runs it. With start set, it first reports on entered and waits
// for start to close, so that concurrent calls begin together.
func (p cniPlugin) exec(host, command string, a attachment, entered *sync.WaitGroup, start <-chan struct{}) call {
	cmd := exec.Command(p.bin) // #nosec G204 -- test
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"CNI_COMMAND=" + command,
		"CNI_CONTAINERID=" + a.id,
		"CNI_NETNS=" + a.netns,
		"CNI_IFNAME=eth0",
		"CNI_PATH=" + p.path,
	}
	if a.pod != nil {
		env = append(env, fmt.Sprintf("CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_UID=%s",
			a.pod.Namespace, a.pod.Name, a.pod.UID))
	}
	cmd.Env = env
	cmd.Stdin = bytes.NewReader(p.stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var c call
	err := nsrun.Do(host, func() error {
		if start != nil {
			entered.Done()
			<-start
		}
		t0 := time.Now()
		err := cmd.Run()
		c.took = time.Since(t0)
		return err
	})
	c.stdout, c.stderr = stdout.Bytes(), stderr.Bytes()
	if err != nil {
		c.err = fmt.Errorf("%s %s %s: %w", p.name, command, a.id, err)
	}
	return c
}

// sequentially runs the plugin for each attachment, one after another.
func (cb *cniBench) sequentially(p cniPlugin, command string, as []attachment) []call {
	calls := make([]call, len(as))
	for i, a := range as {
		calls[i] = p.exec(cb.host, command, a, nil, nil)
	}
	return calls
}

// concurrently starts the plugin for every attachment at once: each call
// enters the host namespace on its own thread, then all exec together.
func (cb *cniBench) concurrently(p cniPlugin, command string, as []attachment) []call {
	calls := make([]call, len(as))
	var entered, done sync.WaitGroup
	start := make(chan struct{})
	entered.Add(len(as))
	for i, a := range as {
		done.Go(func() { calls[i] = p.exec(cb.host, command, a, &entered, start) })
	}
	entered.Wait()
	close(start)
	done.Wait()
	return calls
}

// check fails b unless every call succeeded; an ADD's result must hold one
// address: for estuary the pod's bound one, for the reference one in its
// subnet.
func (cb *cniBench) check(b *testing.B, p cniPlugin, command string, as []attachment, calls []call) {
	b.Helper()
	for i, c := range calls {
		if c.err != nil {
			b.Fatalf("%v\nstdout: %s\nstderr: %s", c.err, c.stdout, c.stderr)
		}
		if command != "ADD" {
			continue
		}
		res, err := types100.NewResult(c.stdout)
		if err != nil {
			b.Fatalf("%s ADD %s: result %q: %v", p.name, as[i].id, c.stdout, err)
		}
		r, ok := res.(*types100.Result)
		if !ok || len(r.IPs) != 1 {
			b.Fatalf("%s ADD %s: result %s: want one address", p.name, as[i].id, c.stdout)
		}
		got, _ := netip.AddrFromSlice(r.IPs[0].Address.IP.To4())
		if want := as[i].want; p.name == cb.est.name && got != want {
			b.Fatalf("%s ADD %s: address %s, want %s (the pod's ipinstance)", p.name, as[i].id, got, want)
		}
		if p.name == cb.ref.name && !netip.MustParsePrefix(refSubnet).Contains(got) {
			b.Fatalf("%s ADD %s: address %s is outside %s", p.name, as[i].id, got, refSubnet)
		}
	}
}

// attachments gives each pod a fresh container ID and a fresh network
// namespace, removed when b ends.
func (cb *cniBench) attachments(b *testing.B, prefix string, pods []attachment) []attachment {
	b.Helper()
	as := make([]attachment, len(pods))
	for i, p := range pods {
		as[i] = p
		as[i].id = fmt.Sprintf("bench-%s-%d-%d", prefix, cb.runs, i)
		as[i].netns = nstest.New(b)
	}
	return as
}

// settle collects the setup's garbage and lets the kernel finish removing
// the namespaces of the previous run before anything is timed.
func settle() {
	runtime.GC()
	time.Sleep(time.Second)
}

// checkHostClean fails b if a pod's veth is left in the host namespace or
// an address is still reserved in host-local's store.
func (cb *cniBench) checkHostClean(b *testing.B) {
	b.Helper()
	for line := range strings.Lines(ipCmd(b, cb.host, "-o", "link", "show")) {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if name != "lo" && name != "lan0" && name != "lan0p" {
			b.Errorf("link %s left in the host namespace", name)
		}
	}
	ents, err := os.ReadDir(filepath.Join(cb.hostLocal, refName))
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range ents {
		if e.Name() != "lock" && !strings.HasPrefix(e.Name(), "last_reserved_ip") {
			b.Errorf("host-local still reserves %s", e.Name())
		}
	}
}

// execFloor times VERSION: the cost of starting and ending each binary.
func (cb *cniBench) execFloor(b *testing.B) {
	for range b.N {
		cb.runs++
		as := make([]attachment, benchFloor)
		for i := range as {
			as[i].id = fmt.Sprintf("bench-v-%d-%d", cb.runs, i)
		}
		settle()
		var est, ref timings
		for k, half := range [][]attachment{as[:benchFloor/2], as[benchFloor/2:]} {
			for _, p := range abba(k, cb.est, cb.ref) {
				calls := cb.sequentially(p, "VERSION", half)
				cb.check(b, p, "VERSION", half, calls)
				t := cb.timingsOf(p, &est, &ref)
				t.add = append(t.add, tookOf(calls)...)
			}
		}
		cb.report(b, "exec-floor", est, ref)
	}
}

// sequential runs benchSeq ADDs per plugin, one at a time, in alternating
// batches; then the DELs in the same pattern.
func (cb *cniBench) sequential(b *testing.B) {
	for range b.N {
		cb.runs++
		as := map[string][]attachment{
			cb.est.name: cb.attachments(b, "e", cb.pods[:benchSeq]),
			cb.ref.name: cb.attachments(b, "r", cb.pods[:benchSeq]),
		}
		settle()
		var est, ref timings
		for _, command := range []string{"ADD", "DEL"} {
			for k := range benchSeq / benchBatch {
				for _, p := range abba(k, cb.est, cb.ref) {
					batch := as[p.name][k*benchBatch : (k+1)*benchBatch]
					calls := cb.sequentially(p, command, batch)
					cb.check(b, p, command, batch, calls)
					t := cb.timingsOf(p, &est, &ref)
					if command == "ADD" {
						t.add = append(t.add, tookOf(calls)...)
					} else {
						t.del = append(t.del, tookOf(calls)...)
					}
				}
			}
		}
		cb.checkHostClean(b)
		cb.report(b, "sequential", est, ref)
	}
}

// concurrent starts benchConc ADDs of one plugin at once, then their DELs
// at once, then the same for the other; which goes first alternates.
func (cb *cniBench) concurrent(b *testing.B) {
	for range b.N {
		cb.runs++
		as := map[string][]attachment{
			cb.est.name: cb.attachments(b, "e", cb.pods[benchSeq:]),
			cb.ref.name: cb.attachments(b, "r", cb.pods[benchSeq:]),
		}
		settle()
		var est, ref timings
		for _, p := range abba(cb.runs, cb.est, cb.ref) {
			t := cb.timingsOf(p, &est, &ref)
			calls := cb.concurrently(p, "ADD", as[p.name])
			cb.check(b, p, "ADD", as[p.name], calls)
			t.add = tookOf(calls)
			calls = cb.concurrently(p, "DEL", as[p.name])
			cb.check(b, p, "DEL", as[p.name], calls)
			t.del = tookOf(calls)
		}
		cb.checkHostClean(b)
		cb.report(b, "concurrent", est, ref)
	}
}

// abba orders the two plugins for batch k: x y, y x, x y, ...
func abba(k int, x, y cniPlugin) []cniPlugin {
	if k%2 == 1 {
		return []cniPlugin{y, x}
	}
	return []cniPlugin{x, y}
}

// timingsOf returns est for the estuary plugin, ref for the reference.
func (cb *cniBench) timingsOf(p cniPlugin, est, ref *timings) *timings {
	if p.name == cb.est.name {
		return est
	}
	return ref
}

func tookOf(calls []call) []time.Duration {
	ds := make([]time.Duration, len(calls))
	for i, c := range calls {
		ds[i] = c.took
	}
	return ds
}

// percentile is the nearest-rank percentile q (0 < q <= 100) of ds.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(q / 100 * float64(len(s))))
	return s[max(rank, 1)-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// report records one run's timings for the pooled table, reports the ADD
// percentiles, their ratios and the DEL medians as metrics, and logs them.
func (cb *cniBench) report(b *testing.B, mode string, est, ref timings) {
	b.Helper()
	for name, t := range map[string]timings{cb.est.name: est, cb.ref.name: ref} {
		key := mode + "/" + name
		if cb.pooled[key] == nil {
			cb.pooled[key] = &timings{}
		}
		cb.pooled[key].add = append(cb.pooled[key].add, t.add...)
		cb.pooled[key].del = append(cb.pooled[key].del, t.del...)
	}
	b.ReportMetric(0, "ns/op")
	e50, e99 := percentile(est.add, 50), percentile(est.add, 99)
	r50, r99 := percentile(ref.add, 50), percentile(ref.add, 99)
	b.ReportMetric(ms(e50), "est-p50-ms")
	b.ReportMetric(ms(e99), "est-p99-ms")
	b.ReportMetric(ms(r50), "ref-p50-ms")
	b.ReportMetric(ms(r99), "ref-p99-ms")
	b.ReportMetric(ms(e50)/ms(r50), "p50-ratio")
	b.ReportMetric(ms(e99)/ms(r99), "p99-ratio")
	if len(est.del) > 0 {
		b.ReportMetric(ms(percentile(est.del, 50)), "est-del-p50-ms")
		b.ReportMetric(ms(percentile(ref.del, 50)), "ref-del-p50-ms")
	}
	b.Logf("%s, run %d:\n%s", mode, cb.runs, table(mode, cb.est.name, cb.ref.name, est, ref))
}

// logPooled prints the percentiles of each mode pooled over its runs.
func (cb *cniBench) logPooled() {
	var out strings.Builder
	for _, mode := range []string{"exec-floor", "sequential", "concurrent"} {
		est, ref := cb.pooled[mode+"/"+cb.est.name], cb.pooled[mode+"/"+cb.ref.name]
		if est == nil || ref == nil {
			continue
		}
		fmt.Fprintf(&out, "%s:\n%s", mode, table(mode, cb.est.name, cb.ref.name, *est, *ref))
	}
	if out.Len() > 0 {
		// A benchmark with sub-benchmarks prints no log of its own.
		fmt.Printf("BenchmarkCNIAdd, every run pooled:\n%s", out.String())
	}
}

// table renders p50 and p99 of ADD (and of DEL when measured) per plugin
// and the ratio estuary/reference.
func table(mode, estName, refName string, est, ref timings) string {
	verb := "ADD"
	if mode == "exec-floor" {
		verb = "VERSION"
	}
	var out strings.Builder
	fmt.Fprintf(&out, "  %-16s %5s %9s %9s %9s %9s\n", "plugin", "n", verb+" p50", verb+" p99", "DEL p50", "DEL p99")
	row := func(name string, t timings) {
		fmt.Fprintf(&out, "  %-16s %5d %9.2f %9.2f %9s %9s\n", name, len(t.add),
			ms(percentile(t.add, 50)), ms(percentile(t.add, 99)), msOrDash(t.del, 50), msOrDash(t.del, 99))
	}
	row(estName, est)
	row(refName, ref)
	fmt.Fprintf(&out, "  %-16s %5s %9.2f %9.2f %9s %9s\n", "ratio est/ref", "",
		ms(percentile(est.add, 50))/ms(percentile(ref.add, 50)), ms(percentile(est.add, 99))/ms(percentile(ref.add, 99)),
		ratioOrDash(est.del, ref.del, 50), ratioOrDash(est.del, ref.del, 99))
	out.WriteString("  (milliseconds, nearest rank)\n")
	return out.String()
}

func msOrDash(ds []time.Duration, q float64) string {
	if len(ds) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", ms(percentile(ds, q)))
}

func ratioOrDash(x, y []time.Duration, q float64) string {
	if len(x) == 0 || len(y) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", ms(percentile(x, q))/ms(percentile(y, q)))
}

// denyIngress creates an ingress default-deny NetworkPolicy in ns (with
// BENCH_POLICY=1, every benchmark pod is selected by one, so each ADD's
// policy admission computes a chain).
func denyIngress(tb testing.TB, k8s client.Client, ns string) {
	tb.Helper()
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deny-ingress"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	if err := k8s.Create(bg(), np); err != nil {
		tb.Fatalf("networkpolicy %s/deny-ingress: %v", ns, err)
	}
}
