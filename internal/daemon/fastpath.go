package daemon

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	estuaryv1 "github.com/estuary-cni/estuary/api/v1"
	"github.com/estuary-cni/estuary/internal/dataplane/fastpath"
	"github.com/estuary-cni/estuary/internal/dataplane/ops"
	"github.com/estuary-cni/estuary/internal/sysctl"
)

// fastPathSysctls are set in the node's namespace while the fast path runs.
// conntrack sees a fast-forwarded flow's handshake and teardown but not the
// data between them, so its TCP window tracking must not judge the FIN out
// of window (kube-proxy drops what conntrack calls invalid).
var fastPathSysctls = []sysctl.Setting{{Key: "net/netfilter/nf_conntrack_tcp_be_liberal", Value: "1"}}

// fastPathVerify is how often the attacher reads the devices' filters back
// rather than trusting what it attached.
const fastPathVerify = time.Minute

// fastPath is the loaded program and its attacher; nil when off.
type fastPath struct {
	*fastpath.Attacher
	prog *fastpath.Program
	h    *ops.Handle
}

// startFastPath loads the fast path, or, with cfg.FastPath off, removes a
// previous daemon's from every device. A kernel that refuses the program
// costs the fast path only: the daemon logs why and runs without it. The
// returned status says which it was (and why), for the Node's
// daemon-status annotation.
func startFastPath(cfg Config) (*fastPath, estuaryv1.NodeFastPathStatus, error) {
	off := estuaryv1.NodeFastPathStatus{State: estuaryv1.FastPathOff}
	h, err := ops.Open(cfg.HostNetns)
	if err != nil {
		return nil, off, fmt.Errorf("fast path: %w", err)
	}
	if !cfg.FastPath {
		n, err := fastpath.Remove(h.TC())
		h.Close()
		if err != nil {
			// A pod's veth that goes while the devices are scanned is not a
			// reason to keep pods from starting; the next start retries.
			log.Error(err, "fast path off; removing it from some devices failed", "removedFromDevices", n)
			return nil, off, nil
		}
		log.Info("fast path off", "removedFromDevices", n)
		return nil, off, nil
	}
	opts := fastpath.Options{
		TCPTimeout: conntrackTimeout(cfg.HostNetns, "net/netfilter/nf_conntrack_tcp_timeout_established"),
		UDPTimeout: conntrackTimeout(cfg.HostNetns, "net/netfilter/nf_conntrack_udp_timeout_stream"),
		// Echoes have no conntrack lookup in the program: with policy
		// enforced, they go through netfilter's policy table.
		EchoViaStack: cfg.NetworkPolicy,
	}
	prog, err := fastpath.Load(opts)
	if err == nil {
		err = sysctl.Write(cfg.HostNetns, fastPathSysctls)
		if err != nil {
			err = errors.Join(err, prog.Close())
		}
	}
	if err != nil {
		h.Close()
		log.Error(err, "fast path not started; pods' traffic takes the kernel's forwarding path")
		return nil, estuaryv1.NodeFastPathStatus{State: estuaryv1.FastPathRefused, Reason: err.Error()}, nil
	}
	a, err := fastpath.NewAttacher(prog, h.TC(), fastPathVerify)
	if err != nil {
		h.Close()
		return nil, off, errors.Join(err, prog.Close())
	}
	log.Info("fast path loaded", "sysctls", sysctl.List(fastPathSysctls),
		"tcpTimeout", opts.TCPTimeout, "udpTimeout", opts.UDPTimeout, "echoViaStack", opts.EchoViaStack)
	return &fastPath{Attacher: a, prog: prog, h: h}, estuaryv1.NodeFastPathStatus{State: estuaryv1.FastPathLoaded}, nil
}

// conntrackTimeout reads a conntrack timeout sysctl (seconds); 0 (the
// program's default) when it cannot be read.
func conntrackTimeout(netns, key string) time.Duration {
	v, err := sysctl.Read(netns, key)
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// Close releases the daemon's references; the attached program keeps
// forwarding.
func (f *fastPath) Close() error {
	if f == nil {
		return nil
	}
	f.h.Close()
	return f.prog.Close()
}

// fastPathCollector exports the program's verdict counters and which echoes
// it sends to the stack.
type fastPathCollector struct {
	prog   *fastpath.Program
	desc   *prometheus.Desc
	echoes *prometheus.Desc
}

func newFastPathCollector(p *fastpath.Program) *fastPathCollector {
	return &fastPathCollector{prog: p, echoes: prometheus.NewDesc("estuary_fastpath_echoes_via_stack",
		"Which ICMP echoes between cluster addresses the fast path leaves to the kernel's stack, where the policy table "+
			"decides them: 0 none (policy off), 1 requests only (a program just started, replacing the previous one), 2 all.",
		nil, nil), desc: prometheus.NewDesc("estuary_fastpath_packets_total",
		"Packets the forwarding fast path saw on this node, by verdict: forwarded by the program "+
			"(redirect_peer into a local pod, redirect_neigh out of a device, encap into the overlay's tunnel) or "+
			"passed to the kernel's stack, and why; decap counts tunnel packets the program decapsulated.",
		[]string{"verdict"}, nil)}
}

func (c *fastPathCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.echoes }

func (c *fastPathCollector) Collect(ch chan<- prometheus.Metric) {
	if e, err := c.prog.Echoes(); err != nil {
		ch <- prometheus.NewInvalidMetric(c.echoes, err)
	} else {
		ch <- prometheus.MustNewConstMetric(c.echoes, prometheus.GaugeValue, float64(e))
	}
	s, err := c.prog.Stats()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for verdict, v := range map[string]uint64{
		"redirect_peer": s.RedirectPeer, "redirect_neigh": s.RedirectNeigh,
		"pass_conntrack": s.PassConntrack, "pass_route": s.PassRoute, "pass_other": s.PassOther,
		"encap": s.Encap, "decap": s.Decap,
	} {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(v), verdict)
	}
}
