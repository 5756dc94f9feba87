//go:build lab

package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// What TestBandwidthAnnotationsShapePods asks for and accepts.
const (
	// bandwidthLimit is the annotations' value, bandwidthRate the same in bit/s.
	bandwidthLimit = "20M"
	bandwidthRate  = 20e6
	// bandwidthTolerance is how far a shaped pod's throughput may be from
	// the rate (iperf3 counts TCP payload, the tbf qdisc whole frames: about
	// 4 % below the rate at the overlay's MTU).
	bandwidthTolerance = 0.10
	// unshapedFactor: an unshaped pair must exceed this many times the rate.
	unshapedFactor = 5
	iperfPort      = 5201
	// iperfSeconds are measured after iperfOmit seconds of warm-up, which
	// drain the token bucket a shaped pod starts with: containerd passes a
	// burst of 2^32-1 bits (512 MiB) with every annotation, sent at line rate.
	iperfSeconds = 10
	iperfOmit    = 4
)

// TestBandwidthAnnotationsShapePods: iperf3 between pods on node-1 and
// node-2 (the host's iperf3, run in the pods' network namespaces). Without
// annotations the throughput is far above 20 Mbit/s; a client annotated
// kubernetes.io/egress-bandwidth: 20M sends, and a server annotated
// kubernetes.io/ingress-bandwidth: 20M receives, within 10 % of 20 Mbit/s.
// The shaping is the reference bandwidth plugin's, chained after estuary,
// with the nodes' fast path on.
func TestBandwidthAnnotationsShapePods(t *testing.T) {
	e := needLab(t)
	ns := e.newNamespace(t, "bandwidth")
	e.mustCreate(t, ns,
		netexecPod("client", "node-1", nil),
		withAnnotation(netexecPod("client-egress", "node-1", nil), "kubernetes.io/egress-bandwidth", bandwidthLimit),
		netexecPod("server", "node-2", nil),
		withAnnotation(netexecPod("server-ingress", "node-2", nil), "kubernetes.io/ingress-bandwidth", bandwidthLimit))
	pods := e.waitPods(t, ns, "client", "client-egress", "server", "server-ingress")
	for _, name := range []string{"client-egress", "server-ingress"} {
		p := pods[name]
		t.Logf("%s on %s: %s", name, p.Spec.NodeName, e.shapingState(t, &p))
	}
	measure := func(client, server string) float64 {
		c, s := pods[client], pods[server]
		rate := e.iperf(t, &c, &s)
		t.Logf("%s -> %s: %.2f Mbit/s", client, server, rate/1e6)
		return rate
	}
	t.Run("unshaped", func(t *testing.T) {
		if r := measure("client", "server"); r < unshapedFactor*bandwidthRate {
			t.Errorf("client -> server: %.2f Mbit/s, want more than %d times %.0f Mbit/s without annotations",
				r/1e6, unshapedFactor, bandwidthRate/1e6)
		}
	})
	for _, c := range []struct{ name, client, server, shaped string }{
		{"egress", "client-egress", "server", "client-egress"},
		{"ingress", "client", "server-ingress", "server-ingress"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if r := measure(c.client, c.server); math.Abs(r-bandwidthRate) > bandwidthTolerance*bandwidthRate {
				p := pods[c.shaped]
				t.Errorf("%s -> %s: %.2f Mbit/s, want %.0f Mbit/s ± %.0f %% (%s annotated %s); %s",
					c.client, c.server, r/1e6, bandwidthRate/1e6, bandwidthTolerance*100, c.shaped, bandwidthLimit, e.shapingState(t, &p))
			}
		})
	}
}

func withAnnotation(p *corev1.Pod, key, value string) *corev1.Pod {
	p.Annotations = map[string]string{key: value}
	return p
}

// iperf runs a TCP iperf3 test from the client pod's network namespace to
// the server pod's address, leaving out the first iperfOmit seconds, and
// returns what the server received in bit/s.
func (e *labEnv) iperf(t *testing.T, client, server *corev1.Pod) float64 {
	t.Helper()
	srvNS, cliNS := e.podNetns(t, server), e.podNetns(t, client)
	ctx := testCtx(t, 3*time.Minute)
	port := strconv.Itoa(iperfPort)
	srv := exec.CommandContext(ctx, "nsenter", "--net="+srvNS, "iperf3", "-s", "-1", "-p", port) // #nosec G204 -- test
	if err := srv.Start(); err != nil {
		t.Fatalf("iperf3 server in pod %s: %v", server.Name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = srv.Wait() // the one-off server exits after its test; a failed run is the client's to report
		close(done)
	}()
	defer func() {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = srv.Process.Kill()
			<-done
		}
	}()
	eventually(t, "iperf3 listening in pod "+server.Name, 30*time.Second, func(ctx context.Context) error {
		return listening(ctx, srvNS, port)
	})
	out, err := exec.CommandContext(ctx, "nsenter", "--net="+cliNS, "iperf3", "-c", server.Status.PodIP, "-p", port, // #nosec G204 -- test
		"-t", strconv.Itoa(iperfSeconds), "-O", strconv.Itoa(iperfOmit), "-J").Output()
	rate, perr := receivedRate(out)
	if err != nil || perr != nil {
		t.Fatalf("iperf3 from pod %s to %s (%s): %v, %v\n%s", client.Name, server.Name, server.Status.PodIP, err, perr, out)
	}
	return rate
}

// listening succeeds once a TCP socket listens on port in the namespace.
func listening(ctx context.Context, nsPath, port string) error {
	out, err := exec.CommandContext(ctx, "nsenter", "--net="+nsPath, "ss", "-Hltn", "sport = :"+port).Output() // #nosec G204 -- test
	if err != nil {
		return fmt.Errorf("ss in %s: %w", nsPath, err)
	}
	if !strings.Contains(string(out), ":"+port) {
		return errors.New("nothing listens on :" + port)
	}
	return nil
}

// receivedRate reads the receiver's rate from iperf3's JSON report.
func receivedRate(report []byte) (float64, error) {
	var r struct {
		Error string `json:"error"`
		End   struct {
			SumReceived struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(report, &r); err != nil {
		return 0, fmt.Errorf("parse iperf3 report: %w", err)
	}
	if r.Error != "" {
		return 0, fmt.Errorf("iperf3: %s", r.Error)
	}
	if r.End.SumReceived.BitsPerSecond <= 0 {
		return 0, errors.New("iperf3 report has no received rate")
	}
	return r.End.SumReceived.BitsPerSecond, nil
}

// shapingState describes the traffic control on a pod's host veth (the
// bandwidth plugin's tbf and ingress qdiscs and its mirred filter to an
// ifb device), for the log.
func (e *labEnv) shapingState(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	sb, err := e.sandboxOf(ctx, p)
	if err != nil {
		return fmt.Sprintf("no sandbox: %v", err)
	}
	dev := sb.hostVeth()
	qdiscs, err := e.run(ctx, p.Spec.NodeName, "tc", "qdisc", "show", "dev", dev)
	if err != nil {
		return fmt.Sprintf("tc qdisc show dev %s: %v", dev, err)
	}
	filters, err := e.run(ctx, p.Spec.NodeName, "tc", "filter", "show", "dev", dev, "ingress")
	if err != nil {
		return fmt.Sprintf("tc filter show dev %s ingress: %v", dev, err)
	}
	return fmt.Sprintf("host veth %s qdiscs:\n%s\ningress filters:\n%s", dev, strings.TrimSpace(qdiscs), strings.TrimSpace(filters))
}
