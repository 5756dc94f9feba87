package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/dataplane/policy"
	"github.com/estuary-cni/estuary/internal/endpointstore"
	"github.com/estuary-cni/estuary/internal/policydrops"
	"github.com/estuary-cni/estuary/test/infra/nstest"
)

// serveTestHealth serves h on a loopback port until the test ends.
func serveTestHealth(t *testing.T, h *health) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr, done, err := serveHealth(ctx, "127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return addr
}

// TestPolicyDropsEndpointAndCommand: the health server serves the ring as
// a policydrops.Report, and `estuary-daemon policy-drops -o json`, with
// the flags kubectl estuary passes node-state, prints exactly that Report;
// -o text prints a line per drop.
func TestPolicyDropsEndpointAndCommand(t *testing.T) {
	v := newPolicyVerdicts(nil, "node-a")
	v.counters = map[string]policy.Counter{"c-0123456789abcdef": {Name: "c-0123456789abcdef", Kind: "cnp", Policy: "a-very-long-name"}}
	v.listen(context.Background(), nil, nil)
	at := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	v.add(policydrops.Drop{Time: at, Direction: "ingress", HostVeth: "est1", Protocol: "tcp", Src: "10.0.0.1", Dst: "10.0.0.2",
		SrcPort: 40000, DstPort: 8080})
	v.add(policydrops.Drop{Time: at, Direction: "egress", HostVeth: "est2", Policy: "#c-0123456789abcdef", Protocol: "icmp",
		Src: "fd00::2", Dst: "fd00::9"})
	st, err := endpointstore.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	key := endpointstore.Key{ContainerID: "c0ffee", IfName: "eth0"}
	if err := st.Put(endpointstore.Endpoint{Key: key, PodNamespace: "shop", PodName: "web-0"}); err != nil {
		t.Fatal(err)
	}
	v.add(policydrops.Drop{Time: at, Direction: "ingress", HostVeth: hostVeth(key), Protocol: "udp", Src: "10.0.0.1", Dst: "10.0.0.3",
		SrcPort: 1, DstPort: 53})
	addr := serveTestHealth(t, &health{drops: v, endpoints: st})

	var out, errOut bytes.Buffer
	args := []string{"-o", "json", "--node-name", "node-a", "--health-address", addr, "--cni-conf-dir", "/etc/cni/net.d",
		"--state-db", "/var/lib/estuary/state.db"}
	if code := PolicyDropsMain(args, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	var got policydrops.Report
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("stdout is not a Report: %v\n%s", err, out.String())
	}
	if got.Node != "node-a" || len(got.Drops) != 3 || got.Drops[0].DstPort != 8080 || got.Drops[1].Policy != "cnp/a-very-long-name" ||
		got.Drops[2].Pod != "shop/web-0" || got.Drops[0].Pod != "" {
		t.Fatalf("report %+v", got)
	}

	out.Reset()
	if code := PolicyDropsMain([]string{"--health-address", addr}, &out, &errOut); code != 0 {
		t.Fatalf("text: exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"3 recent drops", "ingress shop/web-0 (" + hostVeth(key) + ") udp", "ingress est1 tcp 10.0.0.1:40000 -> 10.0.0.2:8080 by isolation",
		"egress est2 icmp fd00::2 -> fd00::9 by cnp/a-very-long-name"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, out.String())
		}
	}
	if code := PolicyDropsMain([]string{"-o", "yaml"}, &out, &errOut); code != 2 {
		t.Errorf("-o yaml: exit %d, want 2", code)
	}
}

// TestPolicyDropsEndpointSaysWhyNot: without policy the path answers 404,
// without a readable netlink log 503 with the reason, and the command
// fails with it.
func TestPolicyDropsEndpointSaysWhyNot(t *testing.T) {
	off := serveTestHealth(t, &health{})
	v := newPolicyVerdicts(nil, "n")
	v.listen(context.Background(), nil, errors.New("open the netlink log: protocol not supported"))
	broken := serveTestHealth(t, &health{drops: v})
	for addr, want := range map[string]int{off: http.StatusNotFound, broken: http.StatusServiceUnavailable} {
		resp, err := http.Get("http://" + addr + PolicyDropsPath)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %s, want %d", addr, resp.Status, want)
		}
	}
	var out, errOut bytes.Buffer
	if code := PolicyDropsMain([]string{"-o", "json", "--health-address", broken}, &out, &errOut); code != 1 ||
		!strings.Contains(errOut.String(), "protocol not supported") || out.Len() != 0 {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}

// TestPolicyVerdictMetrics: the counters of a ruleset written to a real
// table are exported one series per policy object, direction and verdict,
// and an object removed from the table drops its series.
func TestPolicyVerdictMetrics(t *testing.T) {
	table, err := ops.OpenPolicy(nstest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(table.Close)
	v := newPolicyVerdicts(table, "n")
	reg := prometheus.NewRegistry()
	reg.MustRegister(verdictCollector{v})
	deny := policy.AdminRule{Rule: policy.Rule{ID: "cnp/deny-db/egress/0", Peers: policy.Peers{Any: true}}, Action: policy.Deny}
	np := policy.Rule{ID: "np/shop/web/ingress/0", Peers: policy.Peers{Any: true}, Ports: []policy.Port{{Protocol: policy.TCP, From: 80}}}
	eps := []policy.Endpoint{
		{HostVeth: "esta", Ingress: policy.Direction{Isolated: true, Allow: []policy.Rule{np}}, Egress: policy.Direction{Admin: []policy.AdminRule{deny}}},
		{HostVeth: "estb", Ingress: policy.Direction{Isolated: true, Allow: []policy.Rule{np}}},
	}
	write := func(n policy.Node) {
		t.Helper()
		rs, err := policy.Compile(n)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Ensure(rs); err != nil {
			t.Fatal(err)
		}
	}
	write(policy.Node{Endpoints: eps})
	want := []string{"cnp deny-db egress drop", "isolation  ingress drop", "np shop/web ingress accept"}
	if got := seriesOf(t, reg, "estuary_policy_packets_total"); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("series %q, want %q (two pods share each)", got, want)
	}
	eps[0].Egress = policy.Direction{}
	write(policy.Node{Endpoints: eps})
	want = want[1:]
	if got := seriesOf(t, reg, "estuary_policy_bytes_total"); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("after the deny is gone: series %q, want %q", got, want)
	}
}

// seriesOf lists the label values (kind policy direction verdict) of a
// metric's series, sorted, each checked to be a counter.
func seriesOf(t *testing.T, reg *prometheus.Registry, name string) []string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if mf.GetType().String() != "COUNTER" {
				t.Fatalf("%s is a %v", name, mf.GetType())
			}
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			out = append(out, l["kind"]+" "+l["policy"]+" "+l["direction"]+" "+l["verdict"])
		}
	}
	return out
}

// TestPolicyWithoutNetlinkLog: on a node whose netlink log cannot be read
// the table is written without log rules (which the kernel would refuse),
// and its drops are still counted.
func TestPolicyWithoutNetlinkLog(t *testing.T) {
	table, err := ops.OpenPolicy(nstest.New(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(table.Close)
	v := newPolicyVerdicts(table, "n")
	v.listen(context.Background(), nil, errors.New("no nfnetlink_log"))
	rs, err := policy.Compile(policy.Node{Endpoints: []policy.Endpoint{{HostVeth: "esta", Ingress: policy.Direction{Isolated: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Ensure(rs); err != nil {
		t.Fatal(err)
	}
	have, err := table.Read()
	if err != nil {
		t.Fatal(err)
	}
	chain := have.Chains[policy.IngressChain("esta")]
	if len(chain) != 1 || strings.Contains(chain[0], "log") || !strings.Contains(chain[0], "counter name") {
		t.Errorf("chain without the log: %q", chain)
	}
	if o, err := v.Ensure(rs); err != nil || !o.Empty() {
		t.Errorf("second write: %v\n%s", err, o)
	}
}
