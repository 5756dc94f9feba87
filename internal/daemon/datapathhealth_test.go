package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/daemon/datapath"
	"github.com/estuary-cni/estuary/internal/daemon/remote"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/internal/faultinject"
	"github.com/estuary-cni/estuary/test/infra/cniservertest"
	"github.com/estuary-cni/estuary/test/infra/testenv"
)

func TestStaleBoundFor(t *testing.T) {
	for _, c := range []struct{ resync, want time.Duration }{
		{datapath.DefaultResync, 90 * time.Second},
		{5 * time.Second, minStaleBound},
		{time.Minute, 3 * time.Minute},
	} {
		if got := staleBoundFor(c.resync); got != c.want {
			t.Errorf("staleBoundFor(%s) = %s, want %s", c.resync, got, c.want)
		}
	}
	if staleBound != 90*time.Second {
		t.Errorf("the daemon's stale bound is %s; docs/status.md says 90s", staleBound)
	}
}

// TestReadyJudgesTheLastGoodPass: the judgement of a loop's progress,
// before its first pass, after a good one, once stale with a failed pass,
// and with a pass that has not returned.
func TestReadyJudgesTheLastGoodPass(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	bound := 90 * time.Second
	for _, c := range []struct {
		name         string
		st           datapath.PassState
		at           time.Duration // after t0
		ready, stale bool
		reason       []string
	}{
		{name: "starting", st: datapath.PassState{Started: t0}, at: 10 * time.Second,
			reason: []string{"since the daemon started 10s ago", "no pass has started yet"}},
		{name: "never good", st: datapath.PassState{Started: t0, LastStart: t0, LastErr: errors.New("read the cache: boom")},
			at: 91 * time.Second, stale: true, reason: []string{"since the daemon started 1m31s ago", "failed: read the cache: boom"}},
		{name: "good", st: datapath.PassState{Started: t0, LastStart: t0, LastGood: t0.Add(time.Second)}, at: 91 * time.Second,
			ready: true},
		{name: "failing", st: datapath.PassState{Started: t0, LastGood: t0, LastStart: t0.Add(80 * time.Second), LastErr: errors.New("overlay: apply")},
			at: 94*time.Second + 200*time.Millisecond, stale: true, reason: []string{"for 1m35s, over the stale bound of 1m30s", "the last pass that ended failed: overlay: apply"}},
		{name: "hung", st: datapath.PassState{Started: t0, LastGood: t0, LastStart: t0.Add(time.Second), Running: true},
			at: 100 * time.Second, stale: true, reason: []string{"for 1m40s", "the pass that started 1m39s ago has not returned"}},
	} {
		v := judgeDataPath(c.st, t0.Add(c.at), bound)
		if v.Ready != c.ready || v.Stale != c.stale || (c.ready && v.Reason != "") {
			t.Errorf("%s: %+v, want ready %v, stale %v", c.name, v, c.ready, c.stale)
		}
		for _, want := range c.reason {
			if !strings.Contains(v.Reason, want) {
				t.Errorf("%s: reason %q lacks %q", c.name, v.Reason, want)
			}
		}
	}
}

// noEndpoints is an endpoint store with no pod.
type noEndpoints struct{}

func (noEndpoints) List() ([]endpointstore.Endpoint, error) { return nil, nil }

// startFaultyLoop runs a data-path loop over the API server of cfg, as the
// daemon's, whose only part is the fault of --fault-datapath-file=fault, a
// pass every 100ms.
func startFaultyLoop(ctx context.Context, t *testing.T, cfg *rest.Config, node, fault string) *datapath.Progress {
	t.Helper()
	scheme, err := newScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	records, err := remote.NewCache(cfg, node)
	if err != nil {
		t.Fatal(err)
	}
	p := datapath.NewProgress()
	s, err := datapath.New(ctx, datapath.Options{Node: node, Resync: 100 * time.Millisecond, Progress: p,
		BeforeRead: []datapath.Part{checkPart{name: partFault, check: faultinject.DataPathFault{Path: fault}.Check}}}, c, records, noEndpoints{}, datapath.NewTrigger())
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	go func() { _ = records.Start(ctx) }()
	go func() { _ = s.Run(ctx) }()
	return p
}

// get answers a GET of path on the health server at addr.
func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// eventually polls cond until it returns nil, or fails after a deadline.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// probe is a wanted answer of the health server.
func probe(t *testing.T, addr, path string, code int, body string) func() error {
	return func() error {
		c, b := get(t, addr, path)
		if c != code || !strings.Contains(b, body) {
			return fmt.Errorf("%s = %d %q, want %d with %q", path, c, b, code, body)
		}
		return nil
	}
}

// daemonEvents lists the Types and Reasons of the daemon's Events on node.
func daemonEvents(ctx context.Context, t *testing.T, k8s client.Client, node string) []string {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(ctx, &list, client.InNamespace(metav1.NamespaceDefault)); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.ReportingController == eventsController && ev.Regarding.Name == node {
			out = append(out, ev.Type+" "+ev.Reason+": "+ev.Note)
		}
	}
	return out
}

// TestReadyAndStatusFollowAStaleDataPath runs a real data-path loop over a
// real API server with the daemon's fault part, the health server over a
// real CNI server, and the status reporter with real Events: /readyz is
// 503 until the first good pass, then 200; with every pass failing it
// turns 503 naming the injected error once no pass has succeeded within
// the bound, while /healthz stays 200; the node status carries the problem
// from one write, with one Warning DataPathStale; a restarted daemon that
// has not passed yet keeps it; once passes succeed again /readyz is 200,
// the problem goes and a Normal DataPathRecovered is recorded. A pass that
// hangs turns /readyz 503 the same way.
func TestReadyAndStatusFollowAStaleDataPath(t *testing.T) {
	cfg, k8s, stop, err := testenv.Start(testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	const node, bound = "node-stale", time.Second
	if err := k8s.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}); err != nil {
		t.Fatal(err)
	}
	fault := filepath.Join(t.TempDir(), "datapath-fault")
	progress := startFaultyLoop(ctx, t, cfg, node, fault)

	socket, state := cniservertest.Paths(t)
	cniservertest.Start(t, cniservertest.NewBackend(), socket, state)
	h, err := newHealth(socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.conn.Close() })
	h.synced.Store(true)
	h.passes, h.staleAfter = progress, bound
	addr, _, err := serveHealth(ctx, "127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	events := newNodeEvents(k8s, node)
	dir := filepath.Join(t.TempDir(), "net.d")
	newReporter := func(p passProgress) *statusReporter {
		return &statusReporter{node: node, reader: k8s, writer: k8s, events: events, dir: dir,
			list: NewConflist("/run/estuary/cni.sock", 30*time.Second), fastPath: estuaryv1.NodeFastPathStatus{State: estuaryv1.FastPathOff},
			passes: p, staleAfter: bound, interval: time.Second}
	}
	r := newReporter(progress)
	pass := func(what string) (*estuaryv1.NodeDataPathStatus, string) {
		t.Helper()
		if err := r.pass(ctx); err != nil {
			t.Fatalf("%s: status pass: %v", what, err)
		}
		st, rv := nodeStatus(t, k8s, node)
		if st == nil {
			t.Fatalf("%s: no status published", what)
		}
		return st.DataPath, rv
	}

	eventually(t, "ready after the first good pass", probe(t, addr, "/readyz", http.StatusOK, "ok"))
	if dp, _ := pass("fresh"); dp != nil {
		t.Fatalf("fresh data path published as %+v", dp)
	}

	// Every pass fails: ready until the bound has passed since the last
	// good pass, then not.
	if err := os.WriteFile(fault, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	failed := eventuallyState(t, progress, "a failed pass", func(st datapath.PassState) bool { return st.LastErr != nil })
	if time.Since(failed.LastGood) < bound/2 {
		if c, b := get(t, addr, "/readyz"); c != http.StatusOK {
			t.Errorf("/readyz within the bound of the last good pass = %d %q, want 200", c, b)
		}
	}
	eventually(t, "unready once stale", probe(t, addr, "/readyz", http.StatusServiceUnavailable, "over the stale bound of 1s"))
	if _, b := get(t, addr, "/readyz"); !strings.Contains(b, faultinject.ErrInjectedPass.Error()) {
		t.Errorf("/readyz when stale = %q, want the last pass's error", b)
	}
	if c, b := get(t, addr, "/healthz"); c != http.StatusOK {
		t.Errorf("/healthz while the data path is stale = %d %q, want 200: liveness does not judge the loop", c, b)
	}
	dp, rv := pass("stale")
	if dp == nil || !strings.Contains(dp.Problem, faultinject.ErrInjectedPass.Error()) || dp.LastGoodPass == nil {
		t.Fatalf("stale data path published as %+v, want the problem with the injected error and the last good pass", dp)
	}
	if _, rv2 := pass("still stale"); rv2 != rv {
		t.Errorf("a stale data path was written again (resourceVersion %s -> %s)", rv, rv2)
	}
	running := r
	r = newReporter(datapath.NewProgress()) // a restarted daemon, before its first pass
	if dp2, rv2 := pass("restarted daemon before its first pass"); rv2 != rv || dp2 == nil || dp2.Problem != dp.Problem {
		t.Errorf("a restarted daemon before its first pass published %+v (resourceVersion %s -> %s), want the problem kept", dp2, rv, rv2)
	}
	r = running

	if err := os.Remove(fault); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ready again after a good pass", probe(t, addr, "/readyz", http.StatusOK, "ok"))
	if dp, _ := pass("fresh again"); dp != nil {
		t.Fatalf("fresh again, published %+v", dp)
	}
	eventually(t, "one DataPathStale and one DataPathRecovered on the Node", func() error {
		got := daemonEvents(ctx, t, k8s, node)
		var rs []string
		for _, e := range got {
			rs = append(rs, strings.SplitN(e, ":", 2)[0])
		}
		if want := []string{"Normal " + ReasonDataPathRecovered, "Warning " + ReasonDataPathStale}; !slices.Equal(sorted(rs), want) {
			return fmt.Errorf("events %q, want %v", got, want)
		}
		return nil
	})

	// A pass that never returns.
	if err := os.WriteFile(fault, []byte("hang"), 0o600); err != nil {
		t.Fatal(err)
	}
	eventually(t, "unready while a pass hangs", probe(t, addr, "/readyz", http.StatusServiceUnavailable, "has not returned"))
	if c, _ := get(t, addr, "/healthz"); c != http.StatusOK {
		t.Errorf("/healthz while a pass hangs = %d, want 200", c)
	}
	if err := os.Remove(fault); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ready again after the hung pass", probe(t, addr, "/readyz", http.StatusOK, "ok"))
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// eventuallyState polls p until ok holds for its state.
func eventuallyState(t *testing.T, p *datapath.Progress, what string, ok func(datapath.PassState) bool) datapath.PassState {
	t.Helper()
	var st datapath.PassState
	eventually(t, what, func() error {
		if st = p.State(); !ok(st) {
			return fmt.Errorf("progress %+v", st)
		}
		return nil
	})
	return st
}
