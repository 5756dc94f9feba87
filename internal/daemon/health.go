package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	cniv1 "github.com/estuary-cni/estuary/api/cni/v1"
	"github.com/estuary-cni/estuary/internal/bgpstatus"
	"github.com/estuary-cni/estuary/internal/daemon/bgp"
	"github.com/estuary-cni/estuary/internal/dataplane/fastpath"
)

// statusTimeout bounds one health probe's Status call.
const statusTimeout = 2 * time.Second

// health answers /healthz, the liveness probe: healthy when the
// IPInstance cache has synced and the CNI server answers Status ready over
// its own socket, as estuary-cni would reach it; and /readyz, the readiness
// probe: healthy and a data-path pass fully succeeded within staleAfter
// (datapathhealth.go says why liveness leaves the data path out).
type health struct {
	conn   *grpc.ClientConn
	client cniv1.CNIClient
	synced atomic.Bool
	// passes is the data-path loop's progress /readyz judges against
	// staleAfter; nil: /readyz answers as /healthz.
	passes     passProgress
	staleAfter time.Duration
	// bgp reports the BGP peers per network for /bgp; nil serves none.
	bgp bgpPeers
	// fastpath's verdict counters go to /metrics; nil exports none.
	fastpath *fastpath.Program
	// endpoints is the endpoint store /endpoints serves for node; nil
	// serves none.
	endpoints endpointStore
	node      string
	// metrics are the daemon's own collectors (the CNI server's, the
	// data-path loop's), served on /metrics.
	metrics []prometheus.Collector
	// reg, when set, is the registry /metrics serves instead of one made
	// of the fields above: Run shares it with the authenticated endpoint.
	reg prometheus.Gatherer
	// metricsLoopbackOnly makes /metrics answer only the node's loopback,
	// when the authenticated endpoint serves the network (metricsserver.go).
	metricsLoopbackOnly bool
	// pprof serves Go's profiles on /debug/pprof/ to the node's loopback.
	pprof bool
	// drops are the policy table's recent drops, served on
	// /debug/policy/drops to the node's loopback; nil: policy is off.
	drops *policyVerdicts
}

// fastPathProgram is the loaded fast path's program, or nil.
func (s healthSources) fastPathProgram() *fastpath.Program {
	if s.fp == nil {
		return nil
	}
	return s.fp.prog
}

// bgpPeers returns the status of the BGP speakers' peers, per network.
type bgpPeers func(context.Context) (map[string][]bgpstatus.PeerStatus, error)

// bgpStatus is /bgp's JSON: every BGP network's peers, and the error of
// any speaker that could not say.
type bgpStatus struct {
	Networks map[string][]bgpstatus.PeerStatus `json:"networks"`
	Error    string                            `json:"error,omitempty"`
}

// serveBGP writes the peers' status as JSON.
func (h *health) serveBGP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), statusTimeout)
	defer cancel()
	peers, err := h.bgp(ctx)
	st := bgpStatus{Networks: peers}
	if err != nil {
		st.Error = err.Error()
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

func newHealth(socket string) (*health, error) {
	dial := func(ctx context.Context, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}
	conn, err := grpc.NewClient("passthrough:///estuary-daemon",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(dial))
	if err != nil {
		return nil, fmt.Errorf("health client for %s: %w", socket, err)
	}
	return &health{conn: conn, client: cniv1.NewCNIClient(conn)}, nil
}

// check returns why the daemon cannot serve an ADD, or nil.
func (h *health) check(ctx context.Context) error {
	if !h.synced.Load() {
		return errors.New("ipinstance cache has not synced")
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	r, err := h.client.Status(ctx, &cniv1.StatusRequest{})
	if err != nil {
		return fmt.Errorf("cni server status: %w", err)
	}
	if !r.GetReady() {
		return fmt.Errorf("cni server not ready: %s", r.GetMessage())
	}
	return nil
}

func (h *health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.check(r.Context()); err != nil {
		http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = fmt.Fprintln(w, "ok")
}

// ready returns why the daemon is not ready, or nil: check's reason, or
// the data path's when no pass has fully succeeded within staleAfter.
func (h *health) ready(ctx context.Context) error {
	if err := h.check(ctx); err != nil {
		return err
	}
	if h.passes == nil {
		return nil
	}
	if v := judgeDataPath(h.passes.State(), time.Now(), h.staleAfter); !v.Ready {
		return errors.New(v.Reason)
	}
	return nil
}

// serveReady answers /readyz.
func (h *health) serveReady(w http.ResponseWriter, r *http.Request) {
	if err := h.ready(r.Context()); err != nil {
		http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	_, _ = fmt.Fprintln(w, "ok")
}

// serveHealth listens on addr and serves /healthz, /readyz, /bgp, /endpoints (the
// endpoint store as JSON) and /metrics (CNI requests, data-path reconciles,
// the node GC, the BGP sessions, the fast path's verdicts, Go and process
// metrics) until ctx ends; /bgp and /endpoints answer only peers on the
// node's loopback, whatever addr is, and so does /metrics when
// h.metricsLoopbackOnly. It returns once listening, with the bound address
// and a channel that yields Serve's outcome.
func serveHealth(ctx context.Context, addr string, h *health) (string, <-chan error, error) {
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("health probe listener on %s: %w", addr, err)
	}
	return lis.Addr().String(), serve(ctx, lis, &http.Server{Handler: h.mux(), ReadHeaderTimeout: 5 * time.Second}), nil
}

// serve serves srv on lis until ctx ends, then shuts it down; the channel
// yields Serve's outcome, nil after a shutdown.
func serve(ctx context.Context, lis net.Listener, srv *http.Server) <-chan error {
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(lis)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), statusTimeout)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	return done
}

// mux routes the health server's paths.
func (h *health) mux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/healthz", h)
	mux.HandleFunc("/readyz", h.serveReady)
	if h.bgp != nil {
		mux.HandleFunc("/bgp", loopbackOnly(h.serveBGP))
	}
	if h.endpoints != nil {
		mux.HandleFunc("GET /endpoints", loopbackOnly(h.serveEndpoints))
	}
	reg := h.reg
	if reg == nil {
		reg = newRegistry(h.bgp, h.fastpath, h.metrics)
	}
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP
	if h.metricsLoopbackOnly {
		metrics = loopbackOnly(metrics)
	}
	mux.HandleFunc("/metrics", metrics)
	mux.HandleFunc("GET "+PolicyDropsPath, loopbackOnly(serveDrops(h.drops, h.endpoints)))
	if h.pprof {
		mux.HandleFunc("/debug/pprof/", loopbackOnly(pprof.Index))
		mux.HandleFunc("/debug/pprof/profile", loopbackOnly(pprof.Profile))
	}
	return mux
}

// newRegistry is the daemon's metrics registry: Go and process metrics,
// the node GC's counter, the daemon's own collectors and, when there are
// any, the BGP sessions and the fast path's verdicts.
func newRegistry(peers bgpPeers, fp *fastpath.Program, own []prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), gcCollected)
	reg.MustRegister(own...)
	if peers != nil {
		reg.MustRegister(bgp.NewNetworksCollector(peers))
	}
	if fp != nil {
		reg.MustRegister(newFastPathCollector(fp))
	}
	return reg
}
