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

// TestFastPathForwardsPodTraffic: pod a on node-1 pings and talks HTTP to
// pod c on node-2; node-1's fast path encapsulates the echoes for node-2's
// VTEP, node-2's decapsulates them and delivers them into c
// (redirect_peer), and the traffic is answered, unNATed, as without it.
func TestFastPathForwardsPodTraffic(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "fastpath")
	e.mustCreate(t, ns, netexecPod("a", "node-1", nil), netexecPod("c", "node-2", nil))
	pods := e.waitPods(t, ns, "a", "c")
	a, c := pods["a"], pods["c"]
	srcNS := e.podNetns(t, &a)
	checkPodReachesPod(t, srcNS, &a, &c) // the path is up before counting

	ctx := testCtx(t, reachTimeout)
	before1, err := e.fastPathCounters(ctx, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	before2, err := e.fastPathCounters(ctx, "node-2")
	if err != nil {
		t.Fatal(err)
	}
	const echoes = 40
	checkPing(t, "a -> c", srcNS, c.Status.PodIP, echoes)
	after1, err := e.fastPathCounters(ctx, "node-1")
	if err != nil {
		t.Fatal(err)
	}
	after2, err := e.fastPathCounters(ctx, "node-2")
	if err != nil {
		t.Fatal(err)
	}
	if d := after1["encap"] - before1["encap"]; d < echoes {
		t.Errorf("node-1 encapsulated %v packets for the tunnel during %d echoes to c; want at least %d (counters %v -> %v)",
			d, echoes, echoes, before1, after1)
	}
	if d := after2["decap"] - before2["decap"]; d < echoes {
		t.Errorf("node-2 decapsulated %v packets from the tunnel during %d echoes to c; want at least %d (counters %v -> %v)",
			d, echoes, echoes, before2, after2)
	}
	if d := after2["redirect_peer"] - before2["redirect_peer"]; d < echoes {
		t.Errorf("node-2 delivered %v packets into local pods during %d echoes to c; want at least %d (counters %v -> %v)",
			d, echoes, echoes, before2, after2)
	}
}
