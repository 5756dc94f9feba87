//go:build lab

package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// daemonHealthPort is the chart's daemon.healthPort, where the daemon's
// health server (/healthz, /metrics, /bgp) listens on the node's loopback.
const daemonHealthPort = "9782"

// fastPathCounters reads a node's estuary_fastpath_packets_total from its
// daemon's /metrics (the daemon runs in the node's namespace), by verdict.
func (e *labEnv) fastPathCounters(ctx context.Context, node string) (map[string]float64, error) {
	body, err := httpGet(ctx, e.nodeNetns[node], "http://"+net.JoinHostPort("127.0.0.1", daemonHealthPort)+"/metrics")
	if err != nil {
		return nil, fmt.Errorf("%s: daemon metrics: %w", node, err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, `estuary_fastpath_packets_total{verdict="`)
		if !ok {
			continue
		}
		verdict, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			return nil, fmt.Errorf("%s: malformed metric line %q", node, line)
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: metric line %q: %w", node, line, err)
		}
		out[verdict] = v
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no estuary_fastpath_packets_total in the daemon's metrics (fast path not loaded?)", node)
	}
	return out, nil
}

// fastPathEchoes checks a node's estuary_fastpath_echoes_via_stack.
func (e *labEnv) fastPathEchoes(ctx context.Context, node, want string) error {
	body, err := httpGet(ctx, e.nodeNetns[node], "http://"+net.JoinHostPort("127.0.0.1", daemonHealthPort)+"/metrics")
	if err != nil {
		return fmt.Errorf("%s: daemon metrics: %w", node, err)
	}
	for line := range strings.Lines(body) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "estuary_fastpath_echoes_via_stack "); ok {
			if v != want {
				return fmt.Errorf("%s: estuary_fastpath_echoes_via_stack is %s; want %s", node, v, want)
			}
			return nil
		}
	}
	return fmt.Errorf("%s: no estuary_fastpath_echoes_via_stack in the daemon's metrics", node)
}

// TestDaemonEndpointsOnlyOnTheNode: a node's daemon answers /metrics and
// /bgp on the node's loopback, and nothing on the node network (here: from
// another node) reaches them.
func TestDaemonEndpointsOnlyOnTheNode(t *testing.T) {
	e := needLab(t)
	if _, err := e.fastPathCounters(testCtx(t, time.Minute), "node-1"); err != nil {
		t.Fatalf("metrics on node-1's loopback: %v", err)
	}
	for _, path := range []string{"/metrics", "/bgp"} {
		u := "http://" + net.JoinHostPort(e.nodeAddr["node-1"], daemonHealthPort) + path
		if body, err := httpGet(testCtx(t, 30*time.Second), e.nodeNetns["node-2"], u); err == nil {
			t.Errorf("node-2 read %s of node-1's daemon on the node network (%d bytes)", u, len(body))
		}
	}
}

// TestFastPathForwardsPodTraffic: pod a on node-1 sends a megabyte over
// one TCP connection to pod c on node-2; node-1's fast path encapsulates
// the established flow's packets for node-2's VTEP, node-2's decapsulates
// them (or forwards those the kernel's GRO decapsulated) and delivers them
// into c (redirect_peer), and the upload is
// answered, unNATed, as without it. With policy enforced (the lab's
// default) ICMP echoes take the kernel's path instead, where the policy
// table decides them.
func TestFastPathForwardsPodTraffic(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "fastpath")
	e.mustCreate(t, ns, netexecPod("a", "node-1", nil), netexecPod("c", "node-2", nil))
	pods := e.waitPods(t, ns, "a", "c")
	a, c := pods["a"], pods["c"]
	srcNS := e.podNetns(t, &a)
	checkPodReachesPod(t, srcNS, &a, &c) // the path is up before counting

	ctx := testCtx(t, reachTimeout)
	counters := func() (map[string]float64, map[string]float64) {
		n1, err := e.fastPathCounters(ctx, "node-1")
		if err != nil {
			t.Fatal(err)
		}
		n2, err := e.fastPathCounters(ctx, "node-2")
		if err != nil {
			t.Fatal(err)
		}
		return n1, n2
	}
	before1, before2 := counters()
	const upload, minPackets = 1 << 20, 8
	if err := httpUpload(ctx, srcNS, fmt.Sprintf("http://%s/upload", net.JoinHostPort(c.Status.PodIP, strconv.Itoa(httpPort))), upload); err != nil {
		t.Fatalf("a -> c: upload of %d bytes: %v", upload, err)
	}
	after1, after2 := counters()
	// node-2's kernel may aggregate the tunnel's packets (GRO) and
	// decapsulate those itself on the VXLAN device, where the program then
	// forwards them: some decap by the program, every packet delivered by it.
	for _, c := range []struct {
		node, verdict string
		min           float64
		before, after map[string]float64
	}{
		{"node-1", "encap", minPackets, before1, after1},
		{"node-2", "decap", 1, before2, after2},
		{"node-2", "redirect_peer", minPackets, before2, after2},
	} {
		if d := c.after[c.verdict] - c.before[c.verdict]; d < c.min {
			t.Errorf("%s: %s grew by %v during a %d-byte upload to c; want at least %v (counters %v -> %v)",
				c.node, c.verdict, d, upload, c.min, c.before, c.after)
		}
	}

	// Every echo takes the stack once the program runs on every device.
	for _, node := range []string{"node-1", "node-2"} {
		eventually(t, node+"'s fast path leaves every echo to the stack", 30*time.Second, func(ctx context.Context) error {
			return e.fastPathEchoes(ctx, node, "2")
		})
	}
	const echoes = 40
	checkPing(t, "a -> c", srcNS, c.Status.PodIP, echoes)
	echoed1, _ := counters()
	if d := echoed1["pass_conntrack"] - after1["pass_conntrack"]; d < echoes {
		t.Errorf("node-1 passed %v packets to the stack during %d echoes to c; with policy enforced every echo must take it "+
			"(counters %v -> %v)", d, echoes, after1, echoed1)
	}
}
